"""The module tree of a live torch.nn.Module as zeromem's JSON (python/README.md, format version 1)."""
import json

FORMAT = "zeromem-module-tree"
FORMAT_VERSION = 1


def _dtype_name(dtype):
    """torch.float32 -> "float32"."""
    return str(dtype).replace("torch.", "", 1)


def _shape(p):
    """The parameter's full shape. Under DeepSpeed ZeRO-3 (zero.Init) a
    parameter holds only its partition and an empty data tensor; its full
    shape is `ds_shape` (deepspeed/runtime/zero/partition_parameters.py
    _convert_to_deepspeed_param)."""
    ds_shape = getattr(p, "ds_shape", None)
    return [int(d) for d in (ds_shape if ds_shape is not None else p.shape)]


def _numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def _config_of(module):
    """A Hugging Face model's config as plain JSON (PretrainedConfig.to_json_string
    turns torch dtypes into strings), or None."""
    config = getattr(module, "config", None)
    to_json = getattr(config, "to_json_string", None)
    if to_json is None:
        return None
    try:
        doc = json.loads(to_json(use_diff=False))
        json.dumps(doc, allow_nan=False)  # NaN or Infinity is not JSON: zeromem would refuse the file
    except Exception:  # a config that does not serialise: the tree stands without it
        return None
    return doc if isinstance(doc, dict) else None


def module_tree(module, source=None):
    """The tree of `module` as a dict of the format zeromem reads.

    Every module is listed once per path it is reached by, parents before
    children, in registration order (`_modules`, as module.modules() walks
    them, but without dropping a module reached twice). Each lists its own
    parameters (`_parameters`, as parameters(recurse=False)). A parameter
    reached a second time, the same Parameter object (Hugging Face ties the
    LM head to the input embedding so: modeling_utils.py
    PreTrainedModel._tie_or_clone_weights), is written with "tied_to" naming
    its first path and counted once in "totals", as module.parameters()
    counts it (torch/nn/modules/module.py _named_members, a set of the
    tensors seen). Tensor identity is the test, not data_ptr(): two Parameter
    objects over one storage are two parameters to the optimizer, each with
    its gradient and state (and DeepSpeed copies each into its flat buffers),
    and on the meta device every data_ptr() is 0."""
    import torch  # only to check the argument: dumping reads attributes

    if not isinstance(module, torch.nn.Module):
        raise TypeError("module_tree: expected a torch.nn.Module, got %s" % type(module).__name__)
    modules = []
    first_path = {}  # id(param) -> first full path
    totals = {"parameters": 0, "trainable": 0}

    def param_entry(prefix, name, p):
        shape = _shape(p)
        entry = {"name": name, "shape": shape, "dtype": _dtype_name(p.dtype),
                 "requires_grad": bool(p.requires_grad)}
        path = name if not prefix else prefix + "." + name
        tied = first_path.get(id(p))
        if tied is not None:
            entry["tied_to"] = tied
            return entry
        first_path[id(p)] = path
        n = _numel(shape)
        totals["parameters"] += n
        if p.requires_grad:
            totals["trainable"] += n
        return entry

    def walk(m, path, on_path):
        params = [param_entry(path, name, p) for name, p in m._parameters.items() if p is not None]
        modules.append({"name": path, "class": type(m).__name__, "parameters": params})
        on_path.add(id(m))
        for name, child in m._modules.items():
            if child is None or id(child) in on_path:  # a module inside itself: not a tree
                continue
            walk(child, name if not path else path + "." + name, on_path)
        on_path.discard(id(m))

    walk(module, "", set())
    doc = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "model_class": type(module).__module__ + "." + type(module).__qualname__,
        "producer": {"zeromem": _version(), "torch": str(torch.__version__)},
    }
    if source is not None:
        doc["source"] = str(source)
    config = _config_of(module)
    if config is not None:
        doc["config"] = config
    doc["totals"] = totals
    doc["modules"] = modules
    return doc


def _version():
    from . import __version__
    return __version__


def dump_module_tree(module, path, source=None):
    """Writes module_tree(module) to `path` (a file name, or a text file object)
    as JSON, one module per line; returns the dict written."""
    doc = module_tree(module, source=source)
    text = _dumps(doc)
    if hasattr(path, "write"):
        path.write(text)
    else:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    return doc


def _dumps(doc):
    """JSON with each module on a line of its own: small to diff, and the
    line zeromem names in an error is that module's."""
    head = {k: v for k, v in doc.items() if k != "modules"}
    lines = ["{"]
    for k, v in head.items():
        lines.append("  %s: %s," % (json.dumps(k), json.dumps(v, sort_keys=k == "config")))
    lines.append('  "modules": [')
    mods = doc["modules"]
    for i, m in enumerate(mods):
        lines.append("    " + json.dumps(m) + ("," if i + 1 < len(mods) else ""))
    lines.append("  ]")
    lines.append("}")
    return "\n".join(lines) + "\n"
