"""Pure-torch (+ timm) models: importable without mmengine."""
from .jetvit import JetBlock, JetViT
from .mixers import MIXERS, FullAttention, LinearAttention, WindowAttention, build_mixer, get_mixer_cls, validate_arch
from .necks import SimpleFeaturePyramid
from .variants import VARIANTS, get_variant

__all__ = ['MIXERS', 'VARIANTS', 'FullAttention', 'JetBlock', 'JetViT', 'LinearAttention', 'SimpleFeaturePyramid',
           'WindowAttention', 'build_mixer', 'get_mixer_cls', 'get_variant', 'validate_arch']
