raise ImportError('jetvit_mm.method was split on 2026-12-07: the stages and the workflow engine are in '
                  'jetvit_mm.pipeline (stages, stage, engine, guard), the demo in jetvit_mm.demo (run, latency, '
                  'report); import from there')
