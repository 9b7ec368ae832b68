// Package xgboostjob is the kubeflow.org/v1 XGBoostJob kind, all of it, on
// the v1 kinds' library (pkg/controller/v1job): its Def (roles Master and
// Worker, the container xgboost with its port xgboostjob-port, the Master's
// success is the job's, a headless Service per replica) and v1's environment
// (env.go).
package xgboostjob
