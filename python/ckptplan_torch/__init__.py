"""ckptplan for PyTorch: export a training step as a ckptplan graph, apply a
plan made on it, and measure that the applied step's peak is the predicted.

    graph = ckptplan_torch.export_graph(model, inputs)      # -> ckptplan plan
    step = ckptplan_torch.apply_plan(model, "plan.json")
    loss = step(*inputs); loss.backward(); optimizer.step()
"""
from .apply import PlanError, apply_plan, load_plan
from .export import export_graph, write_json

__all__ = ["export_graph", "apply_plan", "load_plan", "write_json", "PlanError"]
