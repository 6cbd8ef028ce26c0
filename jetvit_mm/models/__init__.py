"""Pure-torch (+ timm) models: importable without mmengine."""
from .arch import ArchSpec
from .depth_anything import JetViTDepthAnything
from .heads import DPT_PRESETS, DPTHead
from .jetvit import JetBlock, JetViT
from .mixers import MIXERS, FullAttention, LinearAttention, WindowAttention, build_mixer, get_mixer_cls, validate_arch
from .necks import SimpleFeaturePyramid
from .variants import VARIANTS, get_variant

__all__ = ['DPT_PRESETS', 'MIXERS', 'VARIANTS', 'ArchSpec', 'DPTHead', 'FullAttention', 'JetBlock', 'JetViT',
           'JetViTDepthAnything', 'LinearAttention', 'SimpleFeaturePyramid', 'WindowAttention', 'build_mixer',
           'get_mixer_cls', 'get_variant', 'validate_arch']
