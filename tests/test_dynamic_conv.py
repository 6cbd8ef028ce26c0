"""The squeeze and token dynamic convs on a batch of *different* images, against per-image and per-token references
written here: each image (squeeze) or token (token) gets its own kernel, and no kernel leaks to another image."""
import pytest
import torch
import torch.nn.functional as F

from jetvit_mm.models.mixers import SqueezeDynamicConv, TokenDynamicConv

DIM, K = 8, 3


def trained_generator(conv, seed=0):
    """A generator that has left its init (last weight no longer zero), so kernels depend on the input."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in conv.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.5)
    return conv


def images(batch=3, h=5, w=7, seed=1):
    g = torch.Generator().manual_seed(seed)
    v = torch.randn(batch, DIM, h, w, generator=g)
    return v * torch.arange(1, batch + 1).view(-1, 1, 1, 1)  # images that differ in content and scale


def squeeze_reference(conv, v):
    """Per image: the kernel generated from that image's mean V, applied as a depthwise conv to that image only."""
    outs = []
    for image in v:
        hidden = F.silu(image.mean(dim=(1, 2)) @ conv.fc1.weight.T)
        kernel = (hidden @ conv.fc2.weight.T + conv.fc2.bias).view(DIM, 1, K, K)
        outs.append(F.conv2d(image[None], kernel, padding=K // 2, groups=DIM)[0])
    return torch.stack(outs)


def token_reference(conv, v):
    """Per token: the kernel generated from that token's V, weighting its own k x k neighbourhood."""
    B, D, h, w = v.shape
    padded = F.pad(v, (K // 2,) * 4)
    out = torch.zeros_like(v)
    for b in range(B):
        for i in range(h):
            for j in range(w):
                hidden = F.silu(v[b, :, i, j] @ conv.fc1.weight.T)
                kernel = (hidden @ conv.fc2.weight.T + conv.fc2.bias).view(D, K, K)
                out[b, :, i, j] = (padded[b, :, i:i + K, j:j + K] * kernel).sum(dim=(1, 2))
    return out


@pytest.mark.parametrize('cls,reference', [(SqueezeDynamicConv, squeeze_reference),
                                           (TokenDynamicConv, token_reference)], ids=['squeeze', 'token'])
def test_dynamic_conv_gives_each_image_its_own_kernel(cls, reference):
    conv = trained_generator(cls(DIM, kernel_size=K, reduction=2))
    v = images()
    with torch.no_grad():
        out, expected = conv(v), reference(conv, v)
        alone = torch.cat([conv(v[i:i + 1]) for i in range(len(v))])
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(out, alone, rtol=1e-5, atol=1e-5)  # the batch is the images one by one
    # and the kernels differ: one image's (squeeze) or one token's (token) kernel for all gives another output
    with torch.no_grad():
        source = v[0].mean(dim=(1, 2)) if cls is SqueezeDynamicConv else v[0, :, 0, 0]
        one = conv.fc2(conv.act(conv.fc1(source))).view(DIM, 1, K, K)
        shared = F.conv2d(v, one, padding=K // 2, groups=DIM)
    assert (shared[1:] - out[1:]).abs().max() > 1e-2
