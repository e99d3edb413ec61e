import csv
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Employee:
    name: str
    department: str
    salary: float


def load_employees(path: Path) -> list[Employee]:
    """Read employees from a CSV file with the columns name, department, salary."""
