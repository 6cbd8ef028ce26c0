"""A fair baseline for the whole-model benchmark: which SDPA backend each F layer runs, the
teacher timed with cuDNN attention too where it exists (every speed-up then stated against the fastest teacher), and
how a model is compiled when its calls are also captured in CUDA graphs."""
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

import torch
from torch import nn

from jetvit_mm.models.mixers.full import FullAttention

from .profile import backbone_of

CUDNN = 'CUDNN_ATTENTION'
CUDNN_TEACHER = 'teacher (cuDNN attention)'


def sdpa_choice(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> str:
    """The backend ``F.scaled_dot_product_attention(q, k, v)`` takes here (the name of torch's ``SDPBackend``)."""
    from torch.nn.attention import SDPBackend

    return SDPBackend(torch._fused_sdp_choice(q, k, v)).name


def f_layer_backends(model: nn.Module, batch: int, size: Tuple[int, int], dtype: torch.dtype,
                     device: torch.device, forced: Optional[str] = None) -> List[Dict[str, object]]:
    """Per F layer of ``model`` at an input of ``size`` pixels: its index and the SDPA backend it takes (``forced``:
    the backend the benchmark pins it to), probed on tensors of the layer's query shape ``[B, heads, N, head_dim]``
    laid out as its ``heads()`` makes them (views of one qkv output)."""
    backbone = backbone_of(model)
    patch = backbone.patch_size
    layers = []
    for index, block in enumerate(backbone.blocks):
        mixer = getattr(block, 'attn', None)
        if not isinstance(mixer, FullAttention):
            continue
        tokens = mixer.num_prefix_tokens + (size[0] // patch) * (size[1] // patch)
        qkv = torch.empty(batch, tokens, 3, mixer.num_heads, mixer.head_dim, device=device, dtype=dtype)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
        layers.append({'layer': index, 'backend': forced or sdpa_choice(q, k, v)})
    return layers


def sdpa_backends(models: Mapping[str, nn.Module], entries: Sequence[Mapping[str, object]],
                  sizes: Sequence[Tuple[int, int]], batch: int, dtype: torch.dtype,
                  device: torch.device) -> Dict[str, Dict[str, List[Dict[str, object]]]]:
    """``{label: {'HxW': [{'layer', 'backend'}, ...]}}`` for every entry with F layers, at every size."""
    found = {}
    for e in entries:
        per_size = {f'{h}x{w}': f_layer_backends(models[e['label']], batch, (h, w), dtype, device,
                                                 e.get('sdpa_backend')) for h, w in sizes}
        if any(per_size.values()):
            found[e['label']] = per_size
    return found


def cudnn_attention_available(device: torch.device) -> bool:
    """Whether SDPA's cuDNN backend runs here (CUDA, a torch that has it, a card and cuDNN it supports): a tiny
    bf16 attention under ``sdpa_kernel(CUDNN_ATTENTION)``."""
    if device.type != 'cuda':
        return False
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel

        q = torch.randn(1, 2, 128, 64, device=device, dtype=torch.bfloat16)
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            torch.nn.functional.scaled_dot_product_attention(q, q, q)
        torch.cuda.synchronize(device)
    except (AttributeError, RuntimeError):  # no such backend in this torch, or it refused this card / shape
        return False
    return True


def cudnn_teacher_entries(entries: Sequence[Mapping[str, object]], device: torch.device) -> List[Dict[str, object]]:
    """The teacher again with every SDPA call pinned to cuDNN attention, on CUDA where that runs (else none): the
    same weights (the same seed), labelled :data:`CUDNN_TEACHER`."""
    teacher = next((e for e in entries if e['label'] == 'teacher'), None)
    if teacher is None or not cudnn_attention_available(device):
        return []
    return [dict(teacher, label=CUDNN_TEACHER, sdpa_backend=CUDNN)]


class PinnedSDPA(nn.Module):
    """``model`` with every SDPA call of its forward pinned to one backend (``sdpa_kernel``)."""

    def __init__(self, model: nn.Module, backend: str) -> None:
        super().__init__()
        self.model, self.backend = model, backend

    def forward(self, *args, **kwargs):
        from torch.nn.attention import SDPBackend, sdpa_kernel

        with sdpa_kernel(getattr(SDPBackend, self.backend)):
            return self.model(*args, **kwargs)


def make_runners(models: Mapping[str, nn.Module], entries: Sequence[Mapping[str, object]], compile_model: bool,
                 cuda_graph: bool) -> Dict[str, nn.Module]:
    """What the benchmark calls per label: the model, pinned to its entry's SDPA backend if it has one, compiled with
    ``compile_model``. With ``cuda_graph`` too the compiled model (torch.compile's default mode, which builds no CUDA
    graphs of its own) is captured in a CUDA graph by the benchmark itself."""
    runners = {}
    for e in entries:
        model = models[e['label']]
        if e.get('sdpa_backend'):
            model = PinnedSDPA(model, str(e['sdpa_backend']))
        runners[e['label']] = torch.compile(model) if compile_model else model
    return runners
