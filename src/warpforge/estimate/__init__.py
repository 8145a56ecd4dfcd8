"""``warpforge estimate``: a CPU prediction of a model's GPU forward time, validated against published timings.

- walk.py: the target's forward on meta tensors, op by op (optimize's own trace, real sizes, nothing allocated);
- kernels.py: ops -> kernels (op classes) -> fusible regions;
- gpus.py: datasheet presets; model.py: the cost model; fit.py: fitting it;
- predict.py: the estimate with its bands (``estimate``).
"""
