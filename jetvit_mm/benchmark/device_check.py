"""What the device check's Python phases compute (``tools/gpu_check.py`` wires them; ``scripts/gpu_check.sh`` runs
them on a lent GPU): the machine's facts, every arch against the eager and the compiled teacher, and one distillation
step under a process group (NCCL on CUDA, gloo without). Pure torch + timm."""
import time
from typing import Dict, List

import torch


def sdpa_backend(device: torch.device, dtype: torch.dtype, tokens: int = 8197, heads: int = 12,
                 head_dim: int = 64) -> str:
    """The SDPA backend torch picks for one F layer's attention at this shape (what the teacher runs)."""
    from torch.nn.attention import SDPBackend
    q = torch.empty(1, heads, tokens, head_dim, device=device, dtype=dtype)
    return SDPBackend(torch._fused_sdp_choice(q, q, q)).name


def environment() -> Dict[str, object]:
    """Versions, the machine record, the GPU (name, capability, cuDNN attention) and the SDPA backend of the
    teacher's F layers at DINOv3-B 1024x2048 in bf16 and fp32."""
    import numpy

    from .host import machine_record
    info = dict(machine_record(torch.device('cpu'), cpu_count=True), numpy=numpy.__version__, cuda=torch.version.cuda)
    device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')
    if device.type == 'cuda':
        info['gpu'] = torch.cuda.get_device_name()
        info['capability'] = '.'.join(map(str, torch.cuda.get_device_capability()))
        info['cudnn_sdp_enabled'] = torch.backends.cuda.cudnn_sdp_enabled()
    info['sdpa_backend'] = {name: sdpa_backend(device, dtype)
                            for name, dtype in (('bf16', torch.bfloat16), ('fp32', torch.float32))}
    return info


def teacher_ratios(results: List[dict]) -> List[dict]:
    """Every arch of ``tools/benchmark.py models`` results (eager and ``--compile`` ones), each run's median against
    the fastest eager and the fastest compiled teacher of its size, where measured (the compiled one is the fair
    baseline: an eager teacher spends a quarter of its time on RoPE's elementwise ops on the H200)."""
    times = {}
    for result in results:
        mode = 'compiled' if result.get('args', {}).get('compile') else 'eager'
        for r in result['rows']:
            times[mode, r['size'], r['label']] = r['median_ms']
    fastest = {}
    for (mode, size, label), ms in times.items():
        if label.startswith('teacher'):
            fastest[mode, size] = min(ms, fastest.get((mode, size), ms))
    return [dict(size=size, label=label, run=mode, median_ms=ms,
                 **{f'x_vs_{ref}_teacher': fastest[ref, size] / ms for ref in ('eager', 'compiled')
                    if (ref, size) in fastest})
            for (mode, size, label), ms in times.items()]


def distributed_step(wrap: str, device: torch.device) -> Dict[str, object]:
    """One SGD step of a tiny LWF supernet distilled from its teacher (:func:`~.distill.build_distiller`, every mixer
    on the torch path: the step proves the collectives, not the kernels), wrapped as ``wrap`` (``'ddp'``: the
    student; ``'fsdp2'``: teacher and student, one unit per block, bf16 parameters on CUDA). A process group must be
    initialised."""
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    from jetvit_mm.distill.fsdp2 import shard_model
    from jetvit_mm.models.mixers import default_mixers

    from .distill import build_distiller
    torch.manual_seed(0)
    mixers = default_mixers(W=dict(window_size=2, kernel='torch'), L=dict(kernel='torch'))
    model = build_distiller(dict(model_name='dinov3_vits16', embed_dim=64, depth=4, num_heads=4, mixers=mixers),
                            'LWFL', indices=(1, 3))
    with torch.no_grad():  # LayerScale 1e-5 makes a random ViT near the identity: make every block count
        for name, p in model.named_parameters():
            if name.endswith('gamma'):
                p.fill_(0.5)
    model = model.to(device)
    student = model.student
    if wrap == 'ddp':  # the frozen teacher's parameters need no grad, so DDP leaves them alone
        model = DistributedDataParallel(model, device_ids=[device.index] if device.type == 'cuda' else None,
                                        find_unused_parameters=True)
        units = 1
    else:
        units = shard_model(model, param_dtype=torch.bfloat16 if device.type == 'cuda' else None,
                            reduce_dtype=torch.float32)
    optim = torch.optim.SGD([p for p in student.parameters() if p.requires_grad], lr=0.1)
    x = torch.randn(2, 3, 64, 96, generator=torch.Generator().manual_seed(dist.get_rank())).to(device)
    start = time.perf_counter()
    loss = model(x)
    loss.backward()
    optim.step()
    if device.type == 'cuda':
        torch.cuda.synchronize()
    return dict(wrap=wrap, loss=loss.item(), loss_dtype=str(loss.dtype), units=units,
                seconds=round(time.perf_counter() - start, 3), finite=bool(torch.isfinite(loss) and loss > 0))
