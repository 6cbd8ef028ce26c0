"""The JetViT method as resumable stages: ``stages`` (the one list of the method's stages, built from a task's
options; ``tools/pipeline.py`` runs it, the demo too), ``stage`` (a stage and its arguments), ``engine`` (``Workflow``:
runs, skips and resumes stages; ``guard``: the process a stage runs under), ``inputs`` and ``products`` (what a
stage's fingerprint covers, what its folder's markers record). Imported on its own: nothing here is loaded by
``import jetvit_mm``."""
