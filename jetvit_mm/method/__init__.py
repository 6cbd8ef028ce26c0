"""The JetViT method as resumable stages: ``stages`` (the one list of the method's stages, built from a task's
options; ``tools/pipeline.py`` runs it), ``workflow`` (the engine: ``Workflow``, ``Stage``; ``stage_guard`` the process
a stage runs under) and ``demo`` (a task configuration of the same stages with its own after them; ``tools/demo.py``).
Imported on its own: nothing here is loaded by ``import jetvit_mm``."""
