"""Package layout; everything else is in pyproject.toml.

The robot specs (``hardware/``) and the demo's policy (``policies/a1_flat/``) stay at the top of the repository,
where users read and edit them: there is one copy of each. A wheel carries them as package data, mapped in
here under ``robot_rl/_package_data/``; ``robot_rl.robots.spec`` reads them from there when the package is
installed (not editable), and from the checkout otherwise. pyproject.toml cannot add mapped packages to a
``find`` result, hence this file.
"""

PACKAGE_DATA = "robot_rl._package_data"
# package → the checkout directory it is built from, and the files it carries. All of hardware/ ships: the specs,
# anything a spec names by a relative path (``sim_model.source: path``), the DDS config and the README the errors
# point to.
SHIPPED = {
    f"{PACKAGE_DATA}.hardware": ("hardware", ["**/*"]),
    f"{PACKAGE_DATA}.policies.a1_flat": ("policies/a1_flat", ["policy.onnx", "MODEL_CARD.md"]),
}

if __name__ == "__main__":  # how build backends run it; tests/test_packaging.py reads SHIPPED without building
    from setuptools import find_packages, setup

    setup(
        packages=[*find_packages(include=["robot_rl", "robot_rl.*"]), *SHIPPED],
        package_dir={name: src for name, (src, _) in SHIPPED.items()},
        package_data={name: files for name, (_, files) in SHIPPED.items()},
        # Only what package_data names (robot_rl's own packages hold nothing but .py files).
        include_package_data=False,
    )
