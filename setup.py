from pathlib import Path

from setuptools import find_packages, setup

version = {}
exec(Path(__file__).with_name('jetvit_mm').joinpath('version.py').read_text(), version)

setup(
    name='jetvit_mm',
    version=version['__version__'],
    description='JetViT: post-training attention search for high-resolution vision transformers, '
                'as an OpenMMLab plugin',
    long_description=Path(__file__).with_name('README.md').read_text(encoding='utf-8'),
    long_description_content_type='text/markdown',
    packages=find_packages(include=['jetvit_mm', 'jetvit_mm.*']),
    python_requires='>=3.9',
    install_requires=[
        'torch>=2.1',
        'torchvision',
        'mmengine>=0.10.0,<0.11',
        'mmcv>=2.0.0rc4,<2.2.0',
        'mmsegmentation>=1.2.0,<1.3',
        'mmdet>=3.0.0,<3.4',
        'timm>=1.0.29,<2',  # 1.0.29: the oldest tested (make test-min-torch, the GPU image)
        'numpy',
        'safetensors',
        'pycocotools',
        'ftfy',
        'regex',
        'matplotlib',
        'tqdm',
    ],
    extras_require={'tests': ['pytest', 'ruff'], 'deploy': ['onnx>=1.16', 'onnxscript>=0.3', 'onnxruntime>=1.18']},
    license='Apache-2.0',
)
