"""The zeromem Python package (python/zeromem) on live torch models, and zeromem --module-tree on its output.

Run by ctest through run_with_torch.sh, which picks an interpreter that imports torch (Debian's
python3-torch, 1.13; scripts/install-deps.sh installs it) or skips. Every count expected here is the
arithmetic of the shapes each module's constructor gives its parameters (the torch or transformers
source is named at each), checked against torch's own sum over model.parameters() too (which counts a
tied Parameter once: torch/nn/modules/module.py _named_members). The zeromem binary runs with
ZEROMEM_STACK=defaults, so torch 1.13 is never taken for the user's stack.
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.environ.get("ZEROMEM_PYTHON_DIR", os.path.join(os.path.dirname(__file__), "..", "..", "python")))

import torch  # noqa: E402  (run_with_torch.sh checked it imports)
from torch import nn  # noqa: E402

import zeromem  # noqa: E402

ZEROMEM = os.environ.get("ZEROMEM_BINARY")


def torch_counts(model):
    """Total and trainable parameters as torch counts them (each Parameter object once)."""
    params = list(model.parameters())
    return sum(p.numel() for p in params), sum(p.numel() for p in params if p.requires_grad)


def run_zeromem(tree_path, *args):
    """zeromem estimate --module-tree tree_path ... --format json: (exit status, JSON report, stderr)."""
    env = dict(os.environ, ZEROMEM_STACK="defaults")
    r = subprocess.run([ZEROMEM, "estimate", "--module-tree", tree_path, "--gpus", "8", "--stage", "3",
                        "--format", "json"] + list(args), capture_output=True, text=True, env=env)
    return r.returncode, (json.loads(r.stdout) if r.stdout.strip() else None), r.stderr


class RMSNorm(nn.Module):
    """transformers' LlamaRMSNorm: one weight of hidden_size (modeling_llama.py)."""

    def __init__(self, h):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(h))


class LlamaShaped(nn.Module):
    """The module layout of transformers' LlamaForCausalLM (modeling_llama.py: LlamaAttention's
    q/k/v/o_proj without bias, LlamaMLP's gate/up/down_proj, two RMSNorms a layer, the final norm, an
    untied lm_head), with grouped-query attention, and a `config` that serialises as its config.json."""

    def __init__(self, h=64, f=160, layers=3, heads=4, kv_heads=2, vocab=96):
        super().__init__()
        d = h // heads
        self.dims = dict(h=h, f=f, layers=layers, heads=heads, kv_heads=kv_heads, vocab=vocab, d=d)
        self.model = nn.Module()
        self.model.embed_tokens = nn.Embedding(vocab, h)
        self.model.layers = nn.ModuleList()
        for _ in range(layers):
            layer = nn.Module()
            layer.self_attn = nn.Module()
            layer.self_attn.q_proj = nn.Linear(h, heads * d, bias=False)
            layer.self_attn.k_proj = nn.Linear(h, kv_heads * d, bias=False)
            layer.self_attn.v_proj = nn.Linear(h, kv_heads * d, bias=False)
            layer.self_attn.o_proj = nn.Linear(heads * d, h, bias=False)
            layer.mlp = nn.Module()
            layer.mlp.gate_proj = nn.Linear(h, f, bias=False)
            layer.mlp.up_proj = nn.Linear(h, f, bias=False)
            layer.mlp.down_proj = nn.Linear(f, h, bias=False)
            layer.input_layernorm = RMSNorm(h)
            layer.post_attention_layernorm = RMSNorm(h)
            self.model.layers.append(layer)
        self.model.norm = RMSNorm(h)
        self.lm_head = nn.Linear(h, vocab, bias=False)
        doc = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": h,
               "intermediate_size": f, "num_hidden_layers": layers, "num_attention_heads": heads,
               "num_key_value_heads": kv_heads, "vocab_size": vocab, "max_position_embeddings": 256,
               "rms_norm_eps": 1e-6, "tie_word_embeddings": False}

        class Config:  # the one method of transformers' PretrainedConfig the dumper calls
            def to_json_string(self, use_diff=True):
                return json.dumps(doc)

        self.config = Config()


class TiedFrozen(nn.Module):
    """An embedding tied to the LM head as transformers ties them (the same Parameter object:
    modeling_utils.py _tie_or_clone_weights), two Linear blocks, the embedding and the first block frozen."""

    def __init__(self, vocab=50, h=12, device=None):
        super().__init__()
        self.embed = nn.Embedding(vocab, h, device=device)
        self.blocks = nn.ModuleList([nn.Linear(h, h, device=device), nn.Linear(h, h, device=device)])
        self.lm_head = nn.Linear(h, vocab, bias=False, device=device)
        self.lm_head.weight = self.embed.weight
        self.embed.weight.requires_grad_(False)
        self.blocks[0].requires_grad_(False)


class DumpTest(unittest.TestCase):
    def dump(self, model):
        fd, path = tempfile.mkstemp(suffix=".json")
        os.close(fd)
        self.addCleanup(os.unlink, path)
        doc = zeromem.dump_module_tree(model, path)
        with open(path, encoding="utf-8") as f:
            self.assertEqual(json.load(f), doc)
        return path, doc

    def check_zeromem(self, path, total, trainable, largest, *args):
        if not ZEROMEM:
            self.skipTest("ZEROMEM_BINARY not set (run through ctest)")
        rc, report, err = run_zeromem(path, *args)
        self.assertIn(rc, (0, 4), err)
        self.assertEqual(report["model"]["params"], total)
        self.assertEqual(report["trainable_params"], trainable)
        self.assertEqual(report["model"]["largest_layer_params"], largest)
        return report, err

    def test_transformer_encoder(self):
        d, f, layers = 16, 32, 2
        model = nn.TransformerEncoder(nn.TransformerEncoderLayer(d, 2, f), layers)
        # torch/nn/modules/transformer.py TransformerEncoderLayer: MultiheadAttention
        # (activation.py: in_proj_weight 3d x d, in_proj_bias 3d, out_proj Linear(d, d)),
        # linear1 Linear(d, f), linear2 Linear(f, d), norm1 and norm2 LayerNorm(d) (weight, bias).
        per_layer = (3 * d * d + 3 * d) + (d * d + d) + (f * d + f) + (d * f + d) + 2 * (2 * d)
        total = layers * per_layer
        self.assertEqual(torch_counts(model), (total, total))
        path, doc = self.dump(model)
        self.assertEqual(doc["format_version"], 1)
        self.assertEqual(doc["totals"], {"parameters": total, "trainable": total})
        attn = [m for m in doc["modules"] if m["name"] == "layers.0.self_attn"][0]
        self.assertEqual(attn["class"], "MultiheadAttention")
        self.assertEqual([p["shape"] for p in attn["parameters"]], [[3 * d, d], [3 * d]])
        # The largest module's own parameters: each self_attn holds in_proj (3d x d + 3d).
        self.check_zeromem(path, total, total, 3 * d * d + 3 * d)

    def test_llama_shaped(self):
        model = LlamaShaped()
        g = model.dims
        h, f, V, q, kv = g["h"], g["f"], g["vocab"], g["heads"] * g["d"], g["kv_heads"] * g["d"]
        per_layer = h * q + 2 * h * kv + q * h + 3 * h * f + 2 * h
        total = V * h + g["layers"] * per_layer + h + V * h
        self.assertEqual(torch_counts(model), (total, total))
        path, doc = self.dump(model)
        self.assertEqual(doc["totals"], {"parameters": total, "trainable": total})
        self.assertEqual(doc["config"]["model_type"], "llama")
        report, err = self.check_zeromem(path, total, total, max(V * h, h * f))
        # The config the tree carries gives the architecture: activations are estimated, and its count
        # agrees with the tree's (no warning of a difference).
        self.assertEqual(report["model"]["family"], "llama")
        self.assertNotIn("no architecture", err)
        self.assertNotIn("the architecture of", err)

    def test_tied_and_frozen(self):
        vocab, h = 50, 12
        model = TiedFrozen(vocab, h)
        total = vocab * h + 2 * (h * h + h)            # lm_head.weight is embed.weight: once
        trainable = h * h + h                          # blocks.1 only
        self.assertEqual(torch_counts(model), (total, trainable))
        path, doc = self.dump(model)
        self.assertEqual(doc["totals"], {"parameters": total, "trainable": trainable})
        head = [m for m in doc["modules"] if m["name"] == "lm_head"][0]
        self.assertEqual(head["parameters"][0]["tied_to"], "embed.weight")
        report, err = self.check_zeromem(path, total, trainable, vocab * h)
        self.assertEqual(report["frozen_params"], total - trainable)
        self.assertIn("activations are not estimated", err)

    def test_shared_storage_is_two_parameters(self):
        # Two Parameter objects over one storage: torch's optimizers and DeepSpeed keep a gradient and
        # state for each, and model.parameters() yields both; zeromem counts both.
        model = nn.Module()
        model.a = nn.Linear(4, 4, bias=False)
        model.b = nn.Linear(4, 4, bias=False)
        model.b.weight = nn.Parameter(model.a.weight.data)
        self.assertEqual(model.a.weight.data_ptr(), model.b.weight.data_ptr())
        _, doc = self.dump(model)
        self.assertEqual(doc["totals"]["parameters"], torch_counts(model)[0])
        self.assertEqual(doc["totals"]["parameters"], 2 * 16)

    def test_meta_device_ties_by_identity(self):
        # On the meta device every data_ptr() is 0: only the Parameter's identity tells the tie.
        vocab, h = 50, 12
        model = TiedFrozen(vocab, h, device="meta")
        self.assertEqual(model.embed.weight.device.type, "meta")
        _, doc = self.dump(model)
        self.assertEqual(doc["totals"], {"parameters": vocab * h + 2 * (h * h + h), "trainable": h * h + h})
        self.assertEqual(doc["totals"]["parameters"], torch_counts(model)[0])

    def test_tree_command_without_transformers_says_so(self):
        try:
            import transformers  # noqa: F401
            self.skipTest("transformers is importable here")
        except ImportError:
            pass
        r = subprocess.run([sys.executable, "-m", "zeromem.tree", "some/model"], capture_output=True, text=True,
                           env=dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(zeromem.__file__))))
        self.assertEqual(r.returncode, 2)
        self.assertIn("zeromem.tree: transformers is not importable", r.stderr)
        self.assertIn("zeromem.dump_module_tree(model", r.stderr)
        self.assertEqual(r.stdout, "")

    def test_pip_installs_it_without_an_index(self):
        # python/pyproject.toml's in-tree backend requires nothing: pip's isolated build needs no download.
        if subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True).returncode != 0:
            self.skipTest("pip is not installed for %s" % sys.executable)
        src = os.path.dirname(os.path.dirname(zeromem.__file__))
        with tempfile.TemporaryDirectory() as target:
            r = subprocess.run([sys.executable, "-m", "pip", "install", "--no-index", "--no-cache-dir", "--quiet",
                                "--disable-pip-version-check", "--target", target, src], capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            r = subprocess.run([sys.executable, "-c", "import zeromem, sys; sys.stdout.write(zeromem.__file__)"],
                               capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=target), cwd=target)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertTrue(r.stdout.startswith(target), r.stdout)

    def test_not_a_module_is_refused(self):
        with self.assertRaises(TypeError):
            zeromem.module_tree({"weight": torch.zeros(2)})


if __name__ == "__main__":
    unittest.main(verbosity=2)
