from .simple_fpn import LayerNorm2d, SimpleFeaturePyramid

__all__ = ['LayerNorm2d', 'SimpleFeaturePyramid']
