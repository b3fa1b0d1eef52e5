"""zeromem inside a training run: the estimate before the first step, the measurement of the first steps.

    from zeromem import TrainerCallback as ZeromemCallback
    trainer = Trainer(..., callbacks=[ZeromemCallback(seq_len=2048)])

The callback is a `transformers.TrainerCallback` where transformers imports, else a plain class with the
same hook methods, which a hand-written torch loop calls itself (python/README.md shows both).
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

from .module_tree import dump_module_tree

try:  # a Trainer callback where transformers is installed; the same hooks otherwise
    from transformers import TrainerCallback as _Base
except Exception:  # ImportError, or a transformers that fails to import: the plain class stands
    _Base = object

GIB = float(1 << 30)


class EstimatedOutOfMemory(RuntimeError):
    """Raised by TrainerCallback(stop_if_oom=True) when zeromem's GPU verdict is "oom"."""


class CudaMemory:
    """The torch.cuda allocator counters the callback reads (torch/cuda/memory.py). A test passes an
    object with the same methods instead; every figure is in bytes."""

    def __init__(self, device=None):
        import torch

        self._cuda = torch.cuda
        self._device = device

    def available(self):
        return self._cuda.is_available()

    def memory_allocated(self):
        return int(self._cuda.memory_allocated(self._device))

    def max_memory_allocated(self):
        return int(self._cuda.max_memory_allocated(self._device))

    def memory_reserved(self):
        return int(self._cuda.memory_reserved(self._device))

    def max_memory_reserved(self):
        return int(self._cuda.max_memory_reserved(self._device))

    def reset_peak_memory_stats(self):
        self._cuda.reset_peak_memory_stats(self._device)

    def total_memory(self):
        """The device's memory (cudaGetDeviceProperties totalGlobalMem), or None without CUDA."""
        if not self._cuda.is_available():
            return None
        device = self._device if self._device is not None else self._cuda.current_device()
        return int(self._cuda.get_device_properties(device).total_memory)

    def device_name(self):
        return self._cuda.get_device_name(self._device) if self._cuda.is_available() else None


def find_zeromem(binary=None):
    """The zeromem executable: `binary`, else $ZEROMEM_BINARY, else `zeromem` on PATH; None if none."""
    for candidate in (binary, os.environ.get("ZEROMEM_BINARY")):
        if candidate:
            return candidate
    return shutil.which("zeromem")


def resolved_ds_config(args):
    """The DeepSpeed config the Trainer runs: args.hf_deepspeed_config.config (HfTrainerDeepSpeedConfig,
    its "auto" values filled in from the TrainingArguments and the model by trainer_config_process and
    trainer_config_finalize, transformers/integrations/deepspeed.py), else args.deepspeed as given (a
    dict, or a JSON file's path: zeromem resolves "auto" the Trainer's way itself), else None."""
    hf = getattr(args, "hf_deepspeed_config", None)
    config = getattr(hf, "config", None)
    if isinstance(config, dict):
        return config
    ds = getattr(args, "deepspeed", None)
    if isinstance(ds, (dict, str)) and ds:
        return ds
    return None


def _stack_of_this_process():
    """deepspeed=V,torch=V,transformers=V of the packages this interpreter runs (installed ones only):
    the stack zeromem should follow is the run's, which may not be the $VIRTUAL_ENV zeromem would read."""
    try:
        from importlib import metadata
    except ImportError:
        return None
    parts = []
    for name in ("deepspeed", "torch", "transformers"):
        try:
            parts.append("%s=%s" % (name, metadata.version(name)))
        except Exception:  # not installed: zeromem's own default for it
            continue
    return ",".join(parts) if parts else None


def _env_int(*names):
    for n in names:
        v = os.environ.get(n)
        if v and v.isdigit():
            return int(v)
    return None


class TrainerCallback(_Base):
    """Prints zeromem's estimate before the first step and measures the first optimizer steps.

    on_train_begin: dumps `model`'s module tree (dump_module_tree), writes the DeepSpeed config the
    Trainer resolved, runs `zeromem estimate --module-tree TREE --ds-config CFG --format json` with the
    TrainingArguments mapped to flags (below), and prints the GPU verdict and the peak phase. With
    stop_if_oom=True a verdict of "oom" sets control.should_training_stop and raises
    EstimatedOutOfMemory: the Trainer reads should_training_stop only after a step has run
    (trainer.py _inner_training_loop), and the first step is the one that would run out of memory.

    Flags from the TrainingArguments: per_device_train_batch_size -> --micro-batch,
    gradient_accumulation_steps -> --grad-accum, world_size -> --gpus (and --nodes from
    $LOCAL_WORLD_SIZE, which torchrun and the deepspeed launcher set), gradient_checkpointing ->
    --gradient-checkpointing full (or the model's is_gradient_checkpointing), bf16 / fp16 -> --dtype
    (fp32 when neither is set; no --dtype when `args` has neither attribute). The sequence length is
    not a TrainingArgument: give `seq_len` (the longest batch's length, which sets the peak; zeromem
    assumes 2048 without it). The GPU's capacity is `gpu` (a zeromem preset name, --gpu) or
    `gpu_memory` (bytes, or a size such as "80GiB", --gpu-memory), else the device's total memory as
    CUDA reports it. The software stack is the deepspeed, torch and transformers this process imports
    (`stack`, a --stack value, overrides). `extra_args` are appended as given (e.g. ["--offload-optimizer",
    "cpu"] where the config does not say it).

    Measurement: over the first `steps` optimizer steps the allocator's peaks (max_memory_allocated,
    max_memory_reserved) and current figures are read at each phase boundary, the peaks reset there
    (reset_peak_memory_stats), and written as a `zeromem measure` JSON document (`measure_path`),
    which `zeromem calibrate --log` reads, each phase by its name. The boundaries:
      - load: at on_train_begin; its peak is from the process's start (or the last reset before it).
      - forward: on_step_begin (or the end of the previous micro-step) to the end of the model's
        forward (a forward hook on `model`: the loss is inside it when the model computes it).
      - backward: the end of the forward to the optimizer's step (a wrapper around the step of the
        optimizer the Trainer passes, one wrapper level in: accelerate's AcceleratedOptimizer or,
        under DeepSpeed, the engine's ZeRO optimizer, which engine.step calls inside
        accelerator.backward), or to on_substep_end for a micro-step that does not step.
      - optimizer_step: the optimizer's step to on_step_end (the scheduler step and zero_grad too).
    The Trainer itself offers no forward/backward boundary: without a model to hook, a micro-step is
    one "forward_and_backward" reading; without an optimizer to wrap, the last micro-step's backward
    and the step are one "backward_and_optimizer_step" reading. calibrate holds neither against a phase.
    The first forward and backward are "forward" and "backward", later backwards "steady_backward"
    (the estimate's phases); later forwards are "steady_forward", which the estimate has no phase for.

    `memory` replaces the torch.cuda counters (an object with CudaMemory's methods); `print_fn`
    replaces print. The estimate runs on every rank (all ranks stop alike); only the world's process
    zero prints and writes, unless `measure_path` holds "{rank}", then every rank writes its own file.
    """

    def __init__(self, seq_len=None, steps=2, stop_if_oom=False, zeromem=None, gpu=None, gpu_memory=None,
                 stack=None, extra_args=(), output_dir=None, measure_path=None, estimate=True,
                 memory=None, print_fn=None):
        self.seq_len = seq_len
        self.steps = int(steps)
        self.stop_if_oom = stop_if_oom
        self.zeromem = zeromem
        self.gpu = gpu
        self.gpu_memory = gpu_memory
        self.stack = stack
        self.extra_args = list(extra_args)
        self.output_dir = output_dir
        self.measure_path = measure_path
        self.run_estimate = estimate
        self.memory = memory
        self.print = print_fn or (lambda *a: print(*a, file=sys.stderr, flush=True))
        self.estimate_args = None  # the flags after the subcommand, for calibrate too
        self.report = None  # the estimate's JSON
        self.phases = []
        self._step = 0
        self._micro = 0
        self._phase = None  # the phase now open, or None outside the measured steps
        self._hook = None
        self._wrapped = None  # (optimizer, had its own step attribute, that attribute)
        self._rank = 0
        self._zero = True
        self._world = 1
        self._written = False
        self.written_path = None  # the measurement file, once written

    # ---- the estimate ----------------------------------------------------------------------------

    def estimate_flags(self, args, tree_path, config_path, nodes=None, model=None):
        """The flags of `zeromem estimate` (after the subcommand) for these TrainingArguments (and the
        model: a Hugging Face model's is_gradient_checkpointing, set by gradient_checkpointing_enable
        without the TrainingArgument)."""
        f = ["--module-tree", tree_path]
        if config_path:
            f += ["--ds-config", config_path]
        world = int(getattr(args, "world_size", 0) or _env_int("WORLD_SIZE") or 1)
        f += ["--gpus", str(world)]
        if nodes and nodes > 1:
            f += ["--nodes", str(nodes)]
        f += ["--micro-batch", str(int(getattr(args, "per_device_train_batch_size", 1)))]
        f += ["--grad-accum", str(int(getattr(args, "gradient_accumulation_steps", 1)))]
        if self.seq_len:
            f += ["--seq-len", str(int(self.seq_len))]
        ckpt = getattr(args, "gradient_checkpointing", False) or getattr(model, "is_gradient_checkpointing", False)
        f += ["--gradient-checkpointing", "full" if ckpt else "none"]
        if hasattr(args, "bf16") or hasattr(args, "fp16"):  # else the DeepSpeed config's (zeromem's default)
            f += ["--dtype", "bf16" if getattr(args, "bf16", False) else "fp16" if getattr(args, "fp16", False) else "fp32"]
        if self.gpu:
            f += ["--gpu", str(self.gpu)]
        elif self.gpu_memory is not None:
            gm = self.gpu_memory
            f += ["--gpu-memory", "%dB" % gm if isinstance(gm, int) else str(gm)]
        else:
            total = self._memory().total_memory() if self._memory() is not None else None
            if total:
                f += ["--gpu-memory", "%dB" % int(total)]
        stack = self.stack if self.stack is not None else _stack_of_this_process()
        if stack:
            f += ["--stack", stack]
        return f + [str(a) for a in self.extra_args]

    def _nodes(self, args):
        world = int(getattr(args, "world_size", 0) or 1)
        local = _env_int("LOCAL_WORLD_SIZE")
        return world // local if local and world % local == 0 else None

    def _outdir(self):
        if self.output_dir is None:
            self.output_dir = tempfile.mkdtemp(prefix="zeromem-")
        os.makedirs(self.output_dir, exist_ok=True)
        return self.output_dir

    def _estimate(self, args, control, model):
        binary = find_zeromem(self.zeromem)
        if binary is None:
            self.print("zeromem: no zeromem binary (pass zeromem=PATH, set $ZEROMEM_BINARY or put it on PATH): "
                       "no estimate; the first steps are still measured")
            return
        out = self._outdir()
        tree = os.path.join(out, "tree.rank%d.json" % self._rank if self._rank else "tree.json")
        dump_module_tree(model, tree)
        config = resolved_ds_config(args)
        if isinstance(config, dict):
            path = os.path.join(out, "ds_config.rank%d.json" % self._rank if self._rank else "ds_config.json")
            with open(path, "w", encoding="utf-8") as f:
                json.dump(config, f, indent=2, default=str)  # a resolved value that is not JSON: its text
            config = path
        self.estimate_args = self.estimate_flags(args, tree, config, self._nodes(args), model)
        cmd = [binary, "estimate"] + self.estimate_args + ["--format", "json"]
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
        if r.returncode != 0 or not r.stdout.strip():
            self.print("zeromem: estimate failed (exit %d): %s" % (r.returncode, r.stderr.strip()))
            return
        self.report = json.loads(r.stdout)
        if self._zero:
            for line in r.stderr.splitlines():
                if line.strip():
                    self.print(line)
            self.print(self.verdict_line(self.report))
        if self.stop_if_oom and self.report.get("gpu_verdict") == "oom":
            control.should_training_stop = True
            raise EstimatedOutOfMemory(self.verdict_line(self.report))

    @staticmethod
    def verdict_line(report):
        """One line: the GPU verdict, the peak phase and the per-GPU bytes against the capacity."""
        verdict = report.get("gpu_verdict") or "unknown (no GPU capacity given)"
        total = (report.get("per_gpu") or {}).get("total")
        cap = (report.get("cluster") or {}).get("gpu_memory")
        need = "" if total is None else ", %.2f GiB per GPU" % (total / GIB)
        of = "" if not cap else " of %.2f GiB" % (cap / GIB)
        first = report.get("first_oom_phase")
        oom = " (first over the capacity: %s)" % first if first else ""
        return "zeromem: GPU verdict %s: peak phase %s%s%s%s" % (verdict, report.get("peak_phase"), need, of, oom)

    # ---- the measurement -------------------------------------------------------------------------

    def _memory(self):
        if self.memory is None:
            try:
                self.memory = CudaMemory()
            except ImportError:
                return None
        return self.memory

    def _measuring(self):
        m = self._memory()
        return m is not None and (not hasattr(m, "available") or m.available())

    def _close(self, name, step, micro):
        """Ends the open phase as `name`: its peaks since the last reset, the figures now; resets."""
        m = self._memory()
        self.phases.append({"name": name, "step": step, "micro_step": micro,
                            "peak_bytes": {"device": {"total": m.max_memory_allocated()}},
                            "end_bytes": {"device": {"total": m.memory_allocated()}},
                            "reserved_bytes": {"peak": m.max_memory_reserved(), "end": m.memory_reserved()}})
        m.reset_peak_memory_stats()

    def _forward_name(self):
        return "forward" if self._step == 1 and self._micro == 0 else "steady_forward"

    def _backward_name(self):
        return "backward" if self._step == 1 and self._micro == 0 else "steady_backward"

    def _on_forward_end(self, module, inputs, output):
        if self._phase == "forward" and module.training:  # not an evaluation's forward between steps
            self._close(self._forward_name(), self._step, self._micro)
            self._phase = "backward"

    def _step_wrapper(self, original):
        def step(*a, **kw):
            if self._phase == "backward":
                self._close(self._backward_name(), self._step, self._micro)
                self._phase = "optimizer_step"
            elif self._phase == "forward":  # no forward boundary seen (no model hooked)
                self._close("forward_and_backward", self._step, self._micro)
                self._phase = "optimizer_step"
            return original(*a, **kw)
        return step

    def _wrap_optimizer(self, optimizer):
        """Wraps the step that really runs: one level inside a wrapper that has `.optimizer`
        (accelerate's AcceleratedOptimizer, DeepSpeedOptimizerWrapper whose own step is a no-op), else
        `optimizer` itself (a hand-written loop's torch optimizer)."""
        inner = getattr(optimizer, "optimizer", None)
        target = inner if inner is not None and callable(getattr(inner, "step", None)) else optimizer
        if target is None or not callable(getattr(target, "step", None)):
            return
        own = "step" in vars(target)  # torch's LR schedulers wrap step on the instance (lr_scheduler.py)
        self._wrapped = (target, own, vars(target).get("step"))
        target.step = self._step_wrapper(target.step)

    def _unhook(self):
        if self._hook is not None:
            self._hook.remove()
            self._hook = None
        if self._wrapped is not None:
            target, own, previous = self._wrapped
            if own:
                target.step = previous
            else:
                del target.step
            self._wrapped = None

    def measure_document(self):
        """The `zeromem measure` JSON of the readings so far (runtime/src/measure.cpp writes the same
        keys; estimator/src/run_log.cpp read_measure_json reads name, peak_bytes.device.total as the
        phase's peak allocated and end_bytes.device.total as its allocated bytes). reserved_bytes is
        this callback's own: calibrate does not read it."""
        m = self._memory()
        device = m.device_name() if m is not None and hasattr(m, "device_name") else None
        return {"backend": "torch.cuda", "producer": "zeromem.TrainerCallback", "device": device,
                "world_size": self._world,
                "ranks": [{"rank": self._rank, "phases": self.phases, "oom": False}]}

    def _write(self):
        if self._written or not self.phases:
            return
        self._written = True
        path = self.measure_path
        if path is None:
            path = os.path.join(self._outdir(), "measure.json")
        if "{rank}" in path:
            path = path.replace("{rank}", str(self._rank))
        elif not self._zero:
            return
        d = os.path.dirname(path)
        if d:
            os.makedirs(d, exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            json.dump(self.measure_document(), f, indent=1)
            f.write("\n")
        self.written_path = path
        if self._zero:
            tail = ""
            if self.estimate_args:
                tail = "; against the estimate: zeromem calibrate --log %s %s" % (path, " ".join(self.estimate_args))
            self.print("zeromem: %d phase readings of %d step(s) written to %s%s" % (
                len(self.phases), self._step, path, tail))

    # ---- the Trainer's hooks ---------------------------------------------------------------------

    def on_train_begin(self, args, state, control, model=None, optimizer=None, **kwargs):
        self._zero = bool(getattr(state, "is_world_process_zero", True))
        self._rank = int(getattr(args, "process_index", 0) or _env_int("RANK") or 0)
        self._world = int(getattr(args, "world_size", 0) or 1)
        if self.run_estimate and model is not None:
            self._estimate(args, control, model)
        if self.steps <= 0 or not self._measuring():
            return control
        self._close("load", 0, 0)
        if model is not None and hasattr(model, "register_forward_hook"):
            self._hook = model.register_forward_hook(self._on_forward_end)
        if optimizer is not None:
            self._wrap_optimizer(optimizer)
        return control

    def on_step_begin(self, args, state, control, **kwargs):
        if self.steps <= 0 or not self._measuring() or self._step >= self.steps:
            return control
        self._step += 1
        self._micro = 0
        self._memory().reset_peak_memory_stats()  # between steps: logging, evaluation, saving
        self._phase = "forward"
        return control

    def on_substep_end(self, args, state, control, **kwargs):
        if self._phase is None:
            return control
        if self._phase == "forward":
            self._close("forward_and_backward", self._step, self._micro)
        else:
            self._close(self._backward_name(), self._step, self._micro)
        self._micro += 1
        self._phase = "forward"
        return control

    def on_step_end(self, args, state, control, **kwargs):
        if self._phase is None:
            return control
        names = {"optimizer_step": "optimizer_step", "backward": "backward_and_optimizer_step",
                 "forward": "forward_backward_and_optimizer_step"}
        self._close(names[self._phase], self._step, self._micro)
        self._phase = None
        if self._step >= self.steps:
            self._unhook()
            self._write()
        return control

    def on_train_end(self, args, state, control, **kwargs):
        self._phase = None
        self._unhook()
        self._write()  # fewer steps than `steps`
        return control
