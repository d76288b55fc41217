"""The device and precision options the training peers share (lstm_lm_torch.py, txl_torch.py,
nmt_torch.py): --device cpu|cuda and --amp none|fp16|bf16, set up so that the figures compare with
define's benchmark on the same device.

  cuda: float32 with TF32 off for matmuls and cuDNN (define's SGEMM is full float32, and TF32 would
        compare a 10-bit-mantissa GEMM against it); the timed loop is bracketed by
        torch.cuda.synchronize() so queued kernels count; the JSON line gets peak_device_bytes
        (torch.cuda.max_memory_allocated: live tensor bytes, what define's caching allocator
        reports as its peak of active bytes) and the GPU's name.
  amp:  torch.autocast in the given 16-bit dtype around forward and loss (PyTorch's op policy,
        the model of define's autograd/autocast.h), with a GradScaler for fp16 (define's dynamic
        loss scaling); bf16 needs none. On the CPU only bf16 is accepted: CPU autocast has no
        float16.
The default (cpu, none) changes nothing in what the peers did before these options.
"""
import contextlib

import torch


def add_arguments(ap):
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--amp", choices=("none", "fp16", "bf16"), default="none")


def setup(a):
    """Checks the options and configures the backend; returns the torch.device."""
    if a.device == "cuda":
        if not torch.cuda.is_available():
            raise SystemExit("--device cuda: this torch has no CUDA device (torch %s)" % torch.__version__)
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    elif a.amp == "fp16":
        raise SystemExit("--amp fp16 needs --device cuda: CPU autocast has no float16 (use bf16 or none)")
    return torch.device(a.device)


def autocast(a):
    """The context of a training step's forward and loss."""
    if a.amp == "none":
        return contextlib.nullcontext()
    return torch.autocast(device_type=a.device, dtype=torch.float16 if a.amp == "fp16" else torch.bfloat16)


def grad_scaler(a):
    """A GradScaler for fp16 (its default init scale 65536 and growth interval 2000, as define's
    train.loss_scale_init / loss_scale_window); None otherwise."""
    return torch.cuda.amp.GradScaler() if a.amp == "fp16" else None


def synchronize(a):
    if a.device == "cuda":
        torch.cuda.synchronize()


def report_fields(a):
    """What the JSON line adds: the device and amp, and on a GPU its peak tensor memory and name."""
    fields = {"device": a.device, "amp": a.amp}
    if a.device == "cuda":
        fields["peak_device_bytes"] = torch.cuda.max_memory_allocated()
        fields["gpu"] = torch.cuda.get_device_name()
    return fields


def step(loss, opt, params, clip, scaler):
    """backward, optional gradient-norm clipping at `clip`, the optimizer step; through the scaler
    when there is one (unscaled before clipping, the step skipped on an overflow)."""
    if scaler is None:
        loss.backward()
        if clip:
            torch.nn.utils.clip_grad_norm_(params, clip)
        opt.step()
        return
    scaler.scale(loss).backward()
    if clip:
        scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_(params, clip)
    scaler.step(opt)
    scaler.update()
