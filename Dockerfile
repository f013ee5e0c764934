# rlrun on a CUDA machine:
#   docker build -t rlrun .
#   docker run --gpus all --rm -v "$PWD/outputs:/home/rlrun/app/outputs" rlrun python -m rlrun.train device=cuda
# torch comes from PyPI: its Linux wheels bundle the CUDA runtime, so the host needs only the NVIDIA driver.
# The pin is the torch release the test suite runs on, which is rlrun's floor (docs/reliability.md).
FROM python:3.11-slim

RUN useradd --create-home --uid 1000 rlrun
WORKDIR /home/rlrun/app
COPY --chown=rlrun:rlrun pyproject.toml README.md ./
COPY --chown=rlrun:rlrun rlrun ./rlrun
COPY --chown=rlrun:rlrun conf ./conf
RUN pip install --no-cache-dir "torch==2.13.0" ".[sweep]" && mkdir -p outputs && chown rlrun:rlrun outputs
USER rlrun
VOLUME ["/home/rlrun/app/outputs"]
CMD ["python", "-m", "rlrun.doctor"]
