# rlrun in a container: training, the sweep notebook in Jupyter Lab, and TensorBoard, all on the outputs volume.
#   docker build -t rlrun .
#   docker run --gpus all --rm -v "$PWD/outputs:/home/rlrun/app/outputs" rlrun python -m rlrun.train device=cuda
#   docker compose up jupyter tensorboard          # compose.yaml: the train, jupyter and tensorboard services
# torch comes from PyPI: its Linux wheels bundle the CUDA runtime, so the host needs only the NVIDIA driver.
# The pin is the torch release the test suite runs on, which is rlrun's floor (docs/reliability.md).
# Every extra a user of the image may ask for is installed (tests/integration/test_container.py checks that the
# list names each runtime extra of pyproject.toml and that the install resolves): Atari, Box2D, MLflow, W&B,
# Ray, video, the launchers and the notebook.
# The home directory (the WORKDIR inside it included) is writable by any uid, so the services can run as the
# host user that owns ./outputs (compose.yaml: RLRUN_UID/RLRUN_GID, 1000 by default).
# No SSH server: `docker exec -it <container> bash` opens a shell in a running container (README, Container).
FROM python:3.11-slim

RUN useradd --create-home --uid 1000 rlrun
ENV HOME=/home/rlrun
WORKDIR /home/rlrun/app
COPY --chown=rlrun:rlrun pyproject.toml README.md ./
COPY --chown=rlrun:rlrun rlrun ./rlrun
COPY --chown=rlrun:rlrun conf ./conf
COPY --chown=rlrun:rlrun hydra_plugins ./hydra_plugins
COPY --chown=rlrun:rlrun scripts/sweep_report.ipynb ./scripts/
# hadolint ignore=DL3013
RUN pip install --no-cache-dir "torch==2.13.0" ".[report,sweep,notebook,atari,minatar,box2d,mlflow,wandb,ray,video,export]" "jupyterlab>=4,<5" \
    && mkdir -p outputs \
    && chown -R rlrun:rlrun /home/rlrun \
    && chmod -R a+rwX /home/rlrun
USER 1000:1000
VOLUME ["/home/rlrun/app/outputs"]
# Jupyter Lab, TensorBoard
EXPOSE 8888 6006
CMD ["python", "-m", "rlrun.doctor"]
