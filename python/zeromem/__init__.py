"""zeromem's Python side: the module tree of a live model for `zeromem ... --module-tree FILE`.

    import zeromem
    zeromem.dump_module_tree(model, "tree.json")

or, for a Hugging Face model built on the meta device (no weights):

    python -m zeromem.tree meta-llama/Llama-2-7b-hf -o tree.json

The JSON format is documented in python/README.md.
"""
from .module_tree import FORMAT, FORMAT_VERSION, dump_module_tree, module_tree

__version__ = "0.1.0"
__all__ = ["FORMAT", "FORMAT_VERSION", "dump_module_tree", "module_tree", "__version__"]
