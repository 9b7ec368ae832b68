"""Distributed XGBoost on the DMLC_* environment of the xgboost runtimes.

Every pod of the TrainJob is one worker. The worker with DMLC_TASK_ID 0 also
runs the Rabit tracker, on DMLC_TRACKER_PORT; all workers reach it at
DMLC_TRACKER_URI (<trainjob>-node-0-0.<trainjob>, pod 0's DNS name). Each worker
trains on its shard of scikit-learn's bundled breast cancer dataset; the
collective sums the gradient histograms of all shards, so every worker grows the
same trees. Each prints one result line with the final evaluation metric,
which is therefore the same on every worker.

Runs with XGBoost 1.7 (Debian's python3-xgboost) and later 1.x/2.x releases.
"""

import os
import socket
import sys
import time

import numpy as np
import xgboost as xgb
from sklearn.datasets import load_breast_cancer
from sklearn.model_selection import train_test_split
from xgboost import collective
from xgboost.tracker import RabitTracker

ROUNDS = int(os.environ.get("ROUNDS", "20"))


def wait_resolvable(host, deadline):
    """Pod DNS names appear once the pod exists; peers may start first."""
    while True:
        try:
            return socket.gethostbyname(host)
        except OSError as e:
            if time.monotonic() > deadline:
                raise RuntimeError(f"cannot resolve tracker host {host}: {e}") from e
            time.sleep(1)


def main():
    uri = os.environ["DMLC_TRACKER_URI"]
    port = int(os.environ["DMLC_TRACKER_PORT"])
    task = int(os.environ["DMLC_TASK_ID"])
    n_workers = int(os.environ["DMLC_NUM_WORKER"])
    print(f"worker task={task} DMLC_TRACKER_URI={uri} DMLC_TRACKER_PORT={port} DMLC_NUM_WORKER={n_workers}", flush=True)

    tracker = None
    if task == 0:
        # Listen on every address of the pod; ranks follow the task ids.
        tracker = RabitTracker(host_ip="0.0.0.0", n_workers=n_workers, port=port, sortby="task")
        tracker.start(n_workers)
    wait_resolvable(uri, time.monotonic() + 120)

    X, y = load_breast_cancer(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.25, random_state=0, stratify=y)

    args = {"DMLC_TRACKER_URI": uri, "DMLC_TRACKER_PORT": port, "DMLC_TASK_ID": str(task),
            "DMLC_WORKER_CONNECT_RETRY": 60}
    with collective.CommunicatorContext(**args):
        rank, world = collective.get_rank(), collective.get_world_size()
        # This worker's shard of the training rows; the test rows are shared.
        dtrain = xgb.DMatrix(X_train[rank::world], label=y_train[rank::world])
        dtest = xgb.DMatrix(X_test, label=y_test)
        params = {"objective": "binary:logistic", "eval_metric": "logloss", "tree_method": "hist",
                  "max_depth": 3, "eta": 0.3, "nthread": 1, "seed": 0}
        history = {}
        booster = xgb.train(params, dtrain, num_boost_round=ROUNDS, evals=[(dtest, "test")],
                            evals_result=history, verbose_eval=False)
        losses = history["test"]["logloss"]
        accuracy = float(np.mean((booster.predict(dtest) > 0.5) == y_test))
        print(f"XGBOOST_RESULT task={task} rank={rank} world_size={world} train_rows={dtrain.num_row()} "
              f"rounds={len(losses)} first_logloss={losses[0]:.6f} final_logloss={losses[-1]:.6f} "
              f"accuracy={accuracy:.6f}", flush=True)
    if tracker is not None:
        tracker.join()
    return 0


if __name__ == "__main__":
    sys.exit(main())
