"""Deployment: ONNX export with dynamic batch, height and width, and checks against torch (pure: no mm imports)."""
from .onnx_export import (
                          ExportModule,
                          check_finite,
                          check_writable,
                          compare_outputs,
                          export_onnx,
                          onnx_session,
                          run_onnx,
)

__all__ = ['ExportModule', 'check_finite', 'check_writable', 'compare_outputs', 'export_onnx', 'onnx_session',
           'run_onnx']
