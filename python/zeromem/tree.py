"""python -m zeromem.tree MODEL_ID_OR_DIR [-o tree.json]

Builds a Hugging Face model from its config alone on the meta device (no
weights are read or allocated) and writes its module tree for
`zeromem estimate --module-tree tree.json`. MODEL_ID_OR_DIR is what
AutoConfig.from_pretrained takes: a model directory, a config.json, or a Hub
id (read from the local cache when HF_HUB_OFFLINE=1).
"""
import argparse
import sys

from .module_tree import dump_module_tree

# Tried in this order unless --auto-class names one: the head a training run
# usually has, then the bare model (each raises ValueError for a config it
# has no class for: transformers models/auto/auto_factory.py from_config).
_AUTO_CLASSES = ("AutoModelForCausalLM", "AutoModelForSeq2SeqLM", "AutoModel")


class TreeError(Exception):
    """A one-line message for the user; exit status 2."""


def _import_transformers():
    try:
        import transformers
    except ImportError as e:
        raise TreeError(
            "transformers is not importable by %s (%s): install it (pip install transformers) to build a Hugging "
            "Face model from its config, or build the model yourself and call "
            "zeromem.dump_module_tree(model, 'tree.json')" % (sys.executable, e))
    return transformers


def _empty_weights(torch):
    """A context in which modules are built without memory for their weights:
    accelerate's init_empty_weights when installed, else torch's meta device
    as a default-device context (torch >= 2.0, torch/utils/_device.py)."""
    try:
        from accelerate import init_empty_weights
        return init_empty_weights()
    except ImportError:
        pass
    meta = torch.device("meta")
    if hasattr(meta, "__enter__"):
        return meta
    raise TreeError("building on the meta device needs torch >= 2.0 or accelerate (torch %s here): install "
                    "accelerate, or build the model yourself and call zeromem.dump_module_tree(model, 'tree.json')"
                    % torch.__version__)


def build_meta_model(name, auto_class=None, trust_remote_code=False):
    """The model `name` names, built from its config on the meta device."""
    try:
        import torch
    except ImportError as e:
        raise TreeError("torch is not importable by %s (%s)" % (sys.executable, e))
    transformers = _import_transformers()
    try:
        config = transformers.AutoConfig.from_pretrained(name, trust_remote_code=trust_remote_code)
    except (OSError, ValueError) as e:
        raise TreeError("%s: no config could be read: %s" % (name, str(e).splitlines()[0] if str(e) else e))
    names = [auto_class] if auto_class else list(_AUTO_CLASSES)
    errors = []
    for cls_name in names:
        cls = getattr(transformers, cls_name, None)
        if cls is None:
            raise TreeError("--auto-class: transformers has no %s" % cls_name)
        try:
            with _empty_weights(torch):
                return cls.from_config(config, trust_remote_code=trust_remote_code)
        except ValueError as e:  # this auto class has no model for the config
            errors.append("%s: %s" % (cls_name, str(e).splitlines()[0] if str(e) else e))
    raise TreeError("%s: no model class for its config (%s)" % (name, "; ".join(errors)))


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m zeromem.tree", description=__doc__.split("\n\n")[1],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", metavar="MODEL_ID_OR_DIR", help="a model directory, a config.json or a Hub id")
    ap.add_argument("-o", "--output", metavar="FILE", help="where to write the tree (default: standard output)")
    ap.add_argument("--auto-class", metavar="NAME",
                    help="the transformers auto class to build with (default: the first of %s that has a model "
                         "for the config)" % ", ".join(_AUTO_CLASSES))
    ap.add_argument("--trust-remote-code", action="store_true", help="allow the model's own modeling code")
    args = ap.parse_args(argv)
    try:
        model = build_meta_model(args.model, args.auto_class, args.trust_remote_code)
        doc = dump_module_tree(model, args.output or sys.stdout, source=args.model)
    except TreeError as e:
        print("zeromem.tree: %s" % e, file=sys.stderr)
        return 2
    t = doc["totals"]
    print("zeromem.tree: %s: %d parameters, %d trainable, %d modules%s" % (
        type(model).__name__, t["parameters"], t["trainable"], len(doc["modules"]),
        " -> " + args.output if args.output else ""), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
