"""Reports training progress to the TrainJob's status server once, the way
Kubeflow Trainer v2.3's training code does: the URL, the CA file and the token
file come from the three KUBEFLOW_TRAINER_SERVER_* variables; one POST of
{"trainerStatus": ...} with the token as a bearer token. Standard library only.
"""
import datetime
import json
import os
import ssl
import urllib.request

url = os.environ["KUBEFLOW_TRAINER_SERVER_URL"]
ca_file = os.environ["KUBEFLOW_TRAINER_SERVER_CA_CERT"]
with open(os.environ["KUBEFLOW_TRAINER_SERVER_TOKEN"]) as f:
    token = f.read().strip()

body = {
    "trainerStatus": {
        "progressPercentage": 42,
        "estimatedRemainingSeconds": 120,
        "metrics": [
            {"name": "loss", "value": "0.123"},
            {"name": "accuracy", "value": "0.95"},
        ],
        "lastUpdatedTime": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
}
request = urllib.request.Request(
    url,
    data=json.dumps(body).encode(),
    method="POST",
    headers={"Content-Type": "application/json", "Authorization": "Bearer " + token},
)
context = ssl.create_default_context(cafile=ca_file)
with urllib.request.urlopen(request, context=context, timeout=30) as response:
    print("status server answered", response.status, response.read().decode())
print("STATUS_SENT", body["trainerStatus"]["lastUpdatedTime"])
