"""Plans built on simulated replicas: estimate, capacity plan and frontier, disaggregation."""
