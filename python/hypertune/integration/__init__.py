"""Bridges between hypertune and training and tracking frameworks, one
module each; a module imports its framework only when it is imported (and
``import hypertune`` imports none of them):

* :mod:`hypertune.integration.lightning`: a PyTorch Lightning callback that
  reports a validation metric and stops the trainer when the service says.
* :mod:`hypertune.integration.transformers`: a Hugging Face Transformers
  hyperparameter search run on a hypertune study, and the TrainerCallback
  it uses.
* :mod:`hypertune.integration.mlflow`: a :meth:`Study.optimize` callback
  logging each trial as an MLflow run.
* :mod:`hypertune.integration.tensorboard`: a :meth:`Study.optimize`
  callback writing each trial's curves and hyperparameters for TensorBoard.
* :mod:`hypertune.integration.sklearn`: HypertuneSearchCV, a scikit-learn
  search estimator whose candidates are trials of a study.
* :mod:`hypertune.integration.xgboost`: an XGBoost training callback that
  reports each boosting round and stops training when the service says.

docs/integrations.md shows each in use (docs/sklearn-xgboost.md the last
two).
"""
