"""The patch embedding as a reshape + matmul: a ``Conv2d`` whose kernel equals its stride (no padding, no dilation,
one group) is a Linear on the unfolded patches, ``[B, h * w, C * p * p] @ weight.reshape(D, C * p * p).T``.

A GPU guess, not a measured gain: the 3-channel patch convolution ran as a non-tensor-core kernel on an H200, where
one GEMM could use the tensor cores. The convolution stays the default; :func:`set_patch_embed_` switches a model so
that a device check can time both (same weights and keys; the values agree to float rounding).
"""
import torch
import torch.nn.functional as F
from torch import nn

PATCH_EMBEDS = ('conv', 'matmul')


class MatmulPatchConv(nn.Conv2d):
    """An ``nn.Conv2d`` computed as a reshape + matmul where its kernel equals its stride (else as the convolution):
    same parameters, same state-dict keys, the output a channels-last view in NCHW order (what timm's NHWC patch
    embedding permutes back without a copy)."""

    def patchifies(self) -> bool:
        """Whether this convolution is a plain patchify (kernel == stride, no padding, dilation 1, one group)."""
        return (tuple(self.kernel_size) == tuple(self.stride) and self.groups == 1
                and tuple(self.dilation) == (1, 1) and self.padding_mode == 'zeros'
                and (self.padding == 'valid' or tuple(self.padding) == (0, 0)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.patchifies():
            return super().forward(x)
        p, q = self.kernel_size
        B, C, H, W = x.shape
        h, w = H // p, W // q  # the convolution drops the remainder rows and columns
        patches = x[:, :, :h * p, :w * q].reshape(B, C, h, p, w, q).permute(0, 2, 4, 1, 3, 5).reshape(B, h * w, -1)
        out = F.linear(patches, self.weight.reshape(self.out_channels, -1), self.bias)  # [B, h * w, D]
        return out.reshape(B, h, w, -1).permute(0, 3, 1, 2)


def set_patch_embed_(model: nn.Module, kind: str) -> nn.Module:
    """Every ``patch_embed.proj`` convolution of ``model`` computed as ``kind``: ``'conv'`` (``nn.Conv2d``, the
    default) or ``'matmul'`` (:class:`MatmulPatchConv`). In place (the modules' class changes, nothing else);
    returns ``model``."""
    if kind not in PATCH_EMBEDS:
        raise ValueError(f'unknown patch embedding {kind!r}; valid: {", ".join(repr(k) for k in PATCH_EMBEDS)}')
    target = MatmulPatchConv if kind == 'matmul' else nn.Conv2d
    for name, module in model.named_modules():
        proj = getattr(module, 'proj', None) if name.split('.')[-1] == 'patch_embed' else None
        if isinstance(proj, nn.Conv2d) and type(proj) in (nn.Conv2d, MatmulPatchConv):
            proj.__class__ = target
    return model
