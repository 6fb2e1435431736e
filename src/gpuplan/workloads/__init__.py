"""Workloads: training and inference models, pure functions of (Model, System, Plan) -> Result."""
