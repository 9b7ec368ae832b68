"""Distributed XGBoost on the environment of a kubeflow.org/v1 XGBoostJob.

training-operator v1 (and Trainyard) give every replica MASTER_ADDR (the
Master's Service, <job>-master-0), MASTER_PORT (its xgboostjob-port),
WORLD_SIZE (all replicas) and RANK (the Master 0, worker i i+1). The Master
runs the Rabit tracker on MASTER_PORT and trains as rank 0; every replica
joins the tracker at MASTER_ADDR:MASTER_PORT with its RANK as task id, trains
on its shard of scikit-learn's bundled breast cancer dataset, and prints one
XGBOOST_RESULT line; one model, so the final metric is the same everywhere.

Runs with XGBoost 1.7 (Debian's python3-xgboost) and later releases.
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


def main():
    addr, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    print(f"env MASTER_ADDR={addr} MASTER_PORT={port} WORLD_SIZE={world} RANK={rank} "
          f"WORKER_ADDRS={os.environ.get('WORKER_ADDRS', '')}", flush=True)
    tracker = None
    if rank == 0:
        tracker = RabitTracker(host_ip="0.0.0.0", n_workers=world, port=port, sortby="task")
        tracker.start(world)
    deadline = time.monotonic() + 120
    while True:  # the Master's Service appears with its pod; peers may start first
        try:
            socket.gethostbyname(addr)
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(1)

    X, y = load_breast_cancer(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.25, random_state=0, stratify=y)
    args = {"DMLC_TRACKER_URI": addr, "DMLC_TRACKER_PORT": port, "DMLC_TASK_ID": str(rank),
            "DMLC_WORKER_CONNECT_RETRY": 60}
    with collective.CommunicatorContext(**args):
        r, n = collective.get_rank(), collective.get_world_size()
        dtrain = xgb.DMatrix(X_train[r::n], label=y_train[r::n])
        dtest = xgb.DMatrix(X_test, label=y_test)
        params = {"objective": "binary:logistic", "eval_metric": "logloss", "tree_method": "hist",
                  "max_depth": 3, "eta": 0.3, "nthread": 1, "seed": 0}
        history = {}
        booster = xgb.train(params, dtrain, num_boost_round=20, evals=[(dtest, "test")],
                            evals_result=history, verbose_eval=False)
        losses = history["test"]["logloss"]
        accuracy = float(np.mean((booster.predict(dtest) > 0.5) == y_test))
        print(f"XGBOOST_RESULT rank={r} world_size={n} train_rows={dtrain.num_row()} "
              f"first_logloss={losses[0]:.6f} final_logloss={losses[-1]:.6f} accuracy={accuracy:.6f}", flush=True)
    if tracker is not None:
        tracker.join()
    return 0


if __name__ == "__main__":
    sys.exit(main())
