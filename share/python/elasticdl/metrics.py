"""Built-in evaluation metrics, for eval_metrics_fn beside per-example functions:

    def eval_metrics_fn():
        return {"auc": elasticdl.metrics.AUC(num_thresholds=1000),
                "log_loss": lambda labels, predictions: ...per-example values...}

A per-example function's metric is the mean of its values over every evaluated
example. Workers send metric states (sums, counts, histograms), which the master
merges, so the figures are exact however the data was split.
"""


class _Builtin:
    """A metric computed by ElasticDL's C++ runtime."""
    _kind = None

    def _elasticdl_metric(self):
        return (self._kind, 0)

    def __repr__(self):
        return f"elasticdl.metrics.{type(self).__name__}()"


class Accuracy(_Builtin):
    """Fraction of examples whose argmax over classes equals the integer label; with a
    single output column, a prediction >= 0.5 means class 1."""
    _kind = "accuracy"


class MeanSquaredError(_Builtin):
    """Mean of (prediction - label)^2 over all output values."""
    _kind = "mse"


class MeanAbsoluteError(_Builtin):
    """Mean of |prediction - label| over all output values."""
    _kind = "mae"


class AUC(_Builtin):
    """Area under the ROC curve of binary labels (> 0.5 is positive) and probabilities,
    from histograms over num_thresholds buckets (as tf.keras.metrics.AUC)."""
    _kind = "auc"

    def __init__(self, num_thresholds=200):
        if int(num_thresholds) < 2:
            raise ValueError(f"AUC: num_thresholds must be at least 2, not {num_thresholds}")
        self.num_thresholds = int(num_thresholds)

    def _elasticdl_metric(self):
        return (self._kind, self.num_thresholds)

    def __repr__(self):
        return f"elasticdl.metrics.AUC(num_thresholds={self.num_thresholds})"
