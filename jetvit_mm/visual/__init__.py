"""Pictures of a model's outputs and features (pure: numpy, torch, OpenCV): the PCA colour map of patch features and
the side-by-side panels of ``tools/infer.py``."""
from .feature_pca import PCABasis, fit_pca, mean_cosine, pca_colours
from .panels import colour_map, labelled_row

__all__ = ['PCABasis', 'colour_map', 'fit_pca', 'labelled_row', 'mean_cosine', 'pca_colours']
