raise ImportError('jetvit_mm.testing moved on 2026-12-07: the demo\'s generated task is jetvit_mm.demo.context_seg '
                  '(make_context_seg, context_seg_sample, TASKS); import from there')
