"""zeromem's Python side: the module tree of a live model for `zeromem ... --module-tree FILE`, and a
training callback that runs the estimate before the first step and measures the first steps.

    import zeromem
    zeromem.dump_module_tree(model, "tree.json")

or, for a Hugging Face model built on the meta device (no weights):

    python -m zeromem.tree meta-llama/Llama-2-7b-hf -o tree.json

or, in a Trainer script:

    trainer.add_callback(zeromem.TrainerCallback(seq_len=2048))

The JSON format and the callback are documented in python/README.md.
"""
from .module_tree import FORMAT, FORMAT_VERSION, dump_module_tree, module_tree

__version__ = "0.1.0"
__all__ = ["FORMAT", "FORMAT_VERSION", "dump_module_tree", "module_tree", "TrainerCallback",
           "EstimatedOutOfMemory", "__version__"]


def __getattr__(name):
    """TrainerCallback and EstimatedOutOfMemory on first use: zeromem.callback imports transformers
    where it is installed, which `import zeromem` alone should not pay for (PEP 562)."""
    if name in ("TrainerCallback", "EstimatedOutOfMemory", "CudaMemory"):
        from . import callback
        return getattr(callback, name)
    raise AttributeError("module 'zeromem' has no attribute %r" % name)
