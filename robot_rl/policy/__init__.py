"""Policy artifacts: the contract, ONNX export (torch side) and loading + running (onnxruntime side).

torch and onnxruntime are imported only when exporting or loading, so importing this package is cheap.
"""

from robot_rl.policy.contract import (
    SCHEMA_VERSION,
    ContractError,
    ContractMismatch,
    Mismatch,
    PolicyContract,
    Provenance,
    contract_for_task,
)
from robot_rl.policy.contract_check import check_contract
from robot_rl.policy.export import ExportError, collect_provenance, export_onnx, export_rsl_rl_policy
from robot_rl.policy.onnx_policy import OnnxPolicy, Policy, PolicyLoadError, load_policy, read_contract

__all__ = [
    "SCHEMA_VERSION",
    "ContractError",
    "ContractMismatch",
    "ExportError",
    "Mismatch",
    "OnnxPolicy",
    "Policy",
    "PolicyContract",
    "PolicyLoadError",
    "Provenance",
    "check_contract",
    "collect_provenance",
    "contract_for_task",
    "export_onnx",
    "export_rsl_rl_policy",
    "load_policy",
    "read_contract",
]
