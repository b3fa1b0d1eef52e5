"""zeromem.TrainerCallback under a plain torch training loop, with the CUDA counters injected.

Run by ctest through run_with_torch.sh (an interpreter that imports torch, else skipped). transformers is
not needed: without it the callback is a plain class with the Trainer's hook methods, which the loop here
calls in the order transformers' Trainer._inner_training_loop calls them (on_train_begin; per optimizer
step on_step_begin, per micro-step the model's forward and backward, on_substep_end after each micro-step
that does not step, then optimizer.step(), zero_grad() and on_step_end). There is no GPU: a FakeCuda
counts the bytes the loop says it allocates (a caching allocator's counters: torch/cuda/memory.py
max_memory_allocated is the largest allocated figure since reset_peak_memory_stats, which sets the peaks
to the current figures), so every expected reading below is the arithmetic of those allocations. The
estimate runs a fake zeromem that records its arguments, and the real binary ($ZEROMEM_BINARY, with
ZEROMEM_STACK=defaults and --stack defaults) for the end-to-end checks, whose readings `zeromem calibrate`
must read back byte for byte.
"""
import json
import os
import stat
import subprocess
import sys
import tempfile
import types
import unittest

sys.path.insert(0, os.environ.get("ZEROMEM_PYTHON_DIR", os.path.join(os.path.dirname(__file__), "..", "..", "python")))

import torch  # noqa: E402  (run_with_torch.sh checked it imports)
from torch import nn  # noqa: E402

import zeromem  # noqa: E402

ZEROMEM = os.environ.get("ZEROMEM_BINARY")
MIB = 1 << 20
GIB = 1 << 30
ROUND = 2 * MIB  # FakeCuda reserves in whole 2 MiB segments (the caching allocator's small-pool-free rounding
# is not modelled: reserved here is only a figure the test can compute)

P, T0, A, G, S = 64 * MIB, 16 * MIB, 24 * MIB + 1, 8 * MIB, 5 * MIB  # params, a load transient, activations, grads, step temporary


class FakeCuda:
    """CudaMemory's methods over counters the test moves."""

    def __init__(self):
        self.current = self.peak = self.reserved = self.peak_reserved = 0

    def alloc(self, n):
        self.current += n
        self.peak = max(self.peak, self.current)
        self.reserved = max(self.reserved, -(-self.current // ROUND) * ROUND)
        self.peak_reserved = max(self.peak_reserved, self.reserved)

    def free(self, n):
        self.current -= n  # the cache keeps the segments: reserved stays

    def available(self):
        return True

    def memory_allocated(self):
        return self.current

    def max_memory_allocated(self):
        return self.peak

    def memory_reserved(self):
        return self.reserved

    def max_memory_reserved(self):
        return self.peak_reserved

    def reset_peak_memory_stats(self):
        self.peak, self.peak_reserved = self.current, self.reserved

    def total_memory(self):
        return 80 * GIB

    def device_name(self):
        return "FakeCuda"


def reserved_after(n):
    return -(-n // ROUND) * ROUND


class Net(nn.Module):
    """A small model whose forward tells FakeCuda it holds A bytes of activations."""

    def __init__(self, fake):
        super().__init__()
        self.fake = fake
        self.l1 = nn.Linear(16, 32)
        self.l2 = nn.Linear(32, 4)

    def forward(self, x):
        self.fake.alloc(A)
        return self.l2(torch.relu(self.l1(x))).pow(2).mean()


class CountingSGD(torch.optim.SGD):
    """torch's SGD whose step holds an S-byte temporary."""

    def __init__(self, params, fake):
        super().__init__(params, lr=0.01)
        self.fake = fake

    def step(self, closure=None):
        self.fake.alloc(S)
        out = super().step(closure)
        self.fake.free(S)
        return out


class AcceleratedLike:
    """accelerate's AcceleratedOptimizer shape: the real optimizer as .optimizer (DeepSpeedOptimizerWrapper's
    own step is a no-op, the engine steps .optimizer): the callback must wrap the inner step."""

    def __init__(self, optimizer):
        self.optimizer = optimizer

    def step(self):
        self.optimizer.step()


def train(fake, cb, args, steps, grad_accum, wrap=False):
    """The Trainer's loop order, FakeCuda told what each phase holds."""
    model = Net(fake)
    opt = CountingSGD(model.parameters(), fake)
    fake.alloc(P)  # the model's states
    fake.alloc(T0)
    fake.free(T0)  # a transient of loading: the load peak
    state = types.SimpleNamespace(is_world_process_zero=True, global_step=0)
    control = types.SimpleNamespace(should_training_stop=False)
    cb.on_train_begin(args, state, control, model=model, optimizer=AcceleratedLike(opt) if wrap else opt)
    grads = False
    for _ in range(steps):
        cb.on_step_begin(args, state, control)
        for micro in range(grad_accum):
            loss = model(torch.randn(2, 16))
            loss.backward()
            if not grads:
                fake.alloc(G)
                grads = True
            fake.free(A)
            if micro + 1 < grad_accum:
                cb.on_substep_end(args, state, control)
        (AcceleratedLike(opt) if wrap else opt).step()
        opt.zero_grad()
        fake.free(G)  # zero_grad(set_to_none=True)
        grads = False
        state.global_step += 1
        cb.on_step_end(args, state, control)
    cb.on_train_end(args, state, control)
    return model, opt


def training_args(**kw):
    a = dict(per_device_train_batch_size=3, gradient_accumulation_steps=1, gradient_checkpointing=False,
             bf16=True, fp16=False, world_size=1, process_index=0, deepspeed=None)
    a.update(kw)
    return types.SimpleNamespace(**a)


FAKE_ZEROMEM = """#!%s
import json, os, sys
with open(os.environ["FAKE_ZEROMEM_ARGV"], "w") as f:
    json.dump(sys.argv[1:], f)
print(json.dumps({"gpu_verdict": os.environ.get("FAKE_ZEROMEM_VERDICT", "fits"), "peak_phase": "steady_backward",
                  "per_gpu": {"total": 3 * (1 << 30)}, "cluster": {"gpu_memory": 80 * (1 << 30)}}))
"""


def flag(argv, name):
    return argv[argv.index(name) + 1] if name in argv else None


class CallbackTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.tmp = self.dir.name
        self.lines = []

    def tearDown(self):
        self.dir.cleanup()

    def callback(self, fake, **kw):
        kw.setdefault("output_dir", self.tmp)
        kw.setdefault("print_fn", lambda *a: self.lines.append(" ".join(str(x) for x in a)))
        return zeromem.TrainerCallback(memory=fake, **kw)

    def fake_zeromem(self):
        path = os.path.join(self.tmp, "fake-zeromem")
        with open(path, "w") as f:
            f.write(FAKE_ZEROMEM % sys.executable)
        os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)
        os.environ["FAKE_ZEROMEM_ARGV"] = os.path.join(self.tmp, "argv.json")
        return path

    def readings(self):
        with open(os.path.join(self.tmp, "measure.json")) as f:
            doc = json.load(f)
        return {(p["name"], p["step"], p["micro_step"]): p for p in doc["ranks"][0]["phases"]}, doc

    def test_phases_of_two_steps(self):
        fake = FakeCuda()
        cb = self.callback(fake, estimate=False)
        train(fake, cb, training_args(), steps=3, grad_accum=1)
        r, doc = self.readings()
        self.assertEqual(doc["backend"], "torch.cuda")
        names = [(p["name"], p["step"]) for p in doc["ranks"][0]["phases"]]
        # steps=2 (the default): the third step is not measured.
        self.assertEqual(names, [("load", 0), ("forward", 1), ("backward", 1), ("optimizer_step", 1),
                                 ("steady_forward", 2), ("steady_backward", 2), ("optimizer_step", 2)])
        peak = lambda k: r[k]["peak_bytes"]["device"]["total"]  # noqa: E731
        end = lambda k: r[k]["end_bytes"]["device"]["total"]  # noqa: E731
        self.assertEqual((peak(("load", 0, 0)), end(("load", 0, 0))), (P + T0, P))
        self.assertEqual((peak(("forward", 1, 0)), end(("forward", 1, 0))), (P + A, P + A))
        # backward: the gradients arrive while the activations are held, then the activations go.
        self.assertEqual((peak(("backward", 1, 0)), end(("backward", 1, 0))), (P + A + G, P + G))
        # the step's temporary over the gradients; zero_grad frees them before on_step_end.
        self.assertEqual((peak(("optimizer_step", 1, 0)), end(("optimizer_step", 1, 0))), (P + G + S, P))
        self.assertEqual(peak(("steady_backward", 2, 0)), P + A + G)
        # reserved: whole segments of the largest figure so far (P + T0 at load is below P + A + G).
        self.assertEqual(r[("load", 0, 0)]["reserved_bytes"]["end"], reserved_after(P + T0))
        self.assertEqual(r[("backward", 1, 0)]["reserved_bytes"]["peak"], reserved_after(P + A + G))
        self.assertEqual(r[("optimizer_step", 2, 0)]["reserved_bytes"]["peak"], reserved_after(P + A + G))
        self.assertTrue(any("measure.json" in line for line in self.lines))

    def test_gradient_accumulation_and_a_wrapped_optimizer(self):
        fake = FakeCuda()
        cb = self.callback(fake, estimate=False, steps=1)
        model, opt = train(fake, cb, training_args(gradient_accumulation_steps=2), steps=1, grad_accum=2, wrap=True)
        r, doc = self.readings()
        self.assertEqual([(p["name"], p["micro_step"]) for p in doc["ranks"][0]["phases"]],
                         [("load", 0), ("forward", 0), ("backward", 0), ("steady_forward", 1),
                          ("steady_backward", 1), ("optimizer_step", 1)])
        # micro-step 1: its forward over the gradients micro-step 0 left; its backward adds none.
        self.assertEqual(r[("steady_forward", 1, 1)]["peak_bytes"]["device"]["total"], P + G + A)
        self.assertEqual(r[("steady_backward", 1, 1)]["end_bytes"]["device"]["total"], P + G)
        # after the measured steps the hook and the step wrapper are gone.
        self.assertEqual(len(model._forward_hooks), 0)
        self.assertNotIn("step", vars(opt))  # the class's step again

    def test_estimate_flags(self):
        if os.name != "posix":
            self.skipTest("the fake zeromem is a #! script")
        fake = FakeCuda()
        ds = {"train_micro_batch_size_per_gpu": 3, "gradient_accumulation_steps": 2,
              "zero_optimization": {"stage": 3}, "bf16": {"enabled": True}}
        args = training_args(gradient_accumulation_steps=2, gradient_checkpointing=True, world_size=4,
                             hf_deepspeed_config=types.SimpleNamespace(config=ds), deepspeed="unresolved.json")
        os.environ["LOCAL_WORLD_SIZE"] = "2"
        try:
            cb = self.callback(fake, zeromem=self.fake_zeromem(), seq_len=512, stack="defaults")
            train(fake, cb, args, steps=1, grad_accum=2)
        finally:
            del os.environ["LOCAL_WORLD_SIZE"]
        with open(os.environ["FAKE_ZEROMEM_ARGV"]) as f:
            argv = json.load(f)
        self.assertEqual(argv[0], "estimate")
        expected = {"--gpus": "4", "--nodes": "2", "--micro-batch": "3", "--grad-accum": "2", "--seq-len": "512",
                    "--gradient-checkpointing": "full", "--dtype": "bf16", "--gpu-memory": "%dB" % (80 * GIB),
                    "--stack": "defaults", "--format": "json"}
        self.assertEqual({k: flag(argv, k) for k in expected}, expected)
        with open(flag(argv, "--ds-config")) as f:
            self.assertEqual(json.load(f), ds)  # the resolved config, not args.deepspeed
        with open(flag(argv, "--module-tree")) as f:
            self.assertEqual(json.load(f)["totals"]["parameters"], 16 * 32 + 32 + 32 * 4 + 4)  # nn.Linear: weight + bias
        self.assertIn("zeromem: GPU verdict fits: peak phase steady_backward, 3.00 GiB per GPU of 80.00 GiB",
                      self.lines)

    def test_flags_without_deepspeed_or_precision(self):
        cb = self.callback(None, gpu="A100-80GB", stack="defaults")
        argv = cb.estimate_flags(training_args(bf16=False), "t.json", None)
        self.assertNotIn("--ds-config", argv)
        self.assertNotIn("--seq-len", argv)  # zeromem's default, said in the docstring
        self.assertEqual((flag(argv, "--dtype"), flag(argv, "--gpu"), flag(argv, "--gpu-memory")),
                         ("fp32", "A100-80GB", None))
        bare = types.SimpleNamespace(per_device_train_batch_size=1, gradient_accumulation_steps=1)
        model = types.SimpleNamespace(is_gradient_checkpointing=True)  # gradient_checkpointing_enable() on the model
        argv = cb.estimate_flags(bare, "t.json", None, model=model)
        self.assertNotIn("--dtype", argv)  # the DeepSpeed config's, not an fp32 the args never said
        self.assertEqual(flag(argv, "--gradient-checkpointing"), "full")

    def test_stop_if_oom(self):
        fake = FakeCuda()
        os.environ["FAKE_ZEROMEM_VERDICT"] = "oom"
        try:
            cb = self.callback(fake, zeromem=self.fake_zeromem(), stop_if_oom=True, stack="defaults")
            control = types.SimpleNamespace(should_training_stop=False)
            with self.assertRaises(zeromem.EstimatedOutOfMemory):
                cb.on_train_begin(training_args(), types.SimpleNamespace(is_world_process_zero=True), control,
                                  model=Net(fake))
        finally:
            del os.environ["FAKE_ZEROMEM_VERDICT"]
        self.assertTrue(control.should_training_stop)
        self.assertEqual(cb.phases, [])  # raised before measuring

    def test_a_transformers_callback_where_transformers_imports(self):
        """With transformers importable the class derives from transformers.TrainerCallback (here a stand-in
        module: transformers is not installed), so Trainer(callbacks=[...]) takes it."""
        import importlib
        import importlib.util
        path = importlib.import_module("zeromem.callback").__file__  # imported without the stand-in
        stand_in = types.ModuleType("transformers")
        stand_in.TrainerCallback = type("TrainerCallback", (), {})
        saved = sys.modules.get("transformers")
        sys.modules["transformers"] = stand_in
        try:
            spec = importlib.util.spec_from_file_location("zeromem._callback_copy", path)
            copy = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(copy)
        finally:
            if saved is None:
                del sys.modules["transformers"]
            else:
                sys.modules["transformers"] = saved
        self.assertTrue(issubclass(copy.TrainerCallback, stand_in.TrainerCallback))
        self.assertIs(zeromem.TrainerCallback.__mro__[1], object)  # this run's, without transformers

    @unittest.skipUnless(ZEROMEM, "ZEROMEM_BINARY is not set (ctest sets it)")
    def test_real_estimate_and_calibrate(self):
        fake = FakeCuda()
        ds = {"train_micro_batch_size_per_gpu": 3, "gradient_accumulation_steps": 1,
              "zero_optimization": {"stage": 2}, "bf16": {"enabled": True}}
        args = training_args(world_size=2, deepspeed=ds)
        cb = self.callback(fake, zeromem=ZEROMEM, seq_len=128, stack="defaults")
        train(fake, cb, args, steps=2, grad_accum=1)
        self.assertIn(cb.report["gpu_verdict"], ("fits", "tight", "oom"))
        self.assertTrue(any(line.startswith("zeromem: GPU verdict ") for line in self.lines))
        measure = os.path.join(self.tmp, "measure.json")
        env = dict(os.environ, ZEROMEM_STACK="defaults")
        out = subprocess.run([ZEROMEM, "calibrate", "--log", measure] + cb.estimate_args + ["--format", "json"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, env=env)
        self.assertEqual(out.returncode, 0, out.stderr)
        rows = json.loads(out.stdout)["observations"]
        got = [(o["format"], o["message"], o["phase"], o["measured"].get("max_allocated"), o["measured"].get("allocated"))
               for o in rows]
        f = "zeromem measure"
        self.assertEqual(got, [(f, "load", "load", P + T0, P),
                               (f, "forward", "forward", P + A, P + A),
                               (f, "backward", "backward", P + A + G, P + G),
                               (f, "optimizer_step", "optimizer_step", P + G + S, P),
                               (f, "steady_forward", None, P + A, P + A),  # the estimate has no such phase
                               (f, "steady_backward", "steady_backward", P + A + G, P + G),
                               (f, "optimizer_step", "optimizer_step", P + G + S, P)])


if __name__ == "__main__":
    unittest.main()
