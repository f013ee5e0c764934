# rlrun on a CUDA machine:
#   docker build -t rlrun .
#   docker run --gpus all --rm -v "$PWD/outputs:/home/rlrun/app/outputs" rlrun python -m rlrun.train device=cuda
FROM pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime

RUN useradd --create-home --uid 1000 rlrun
WORKDIR /home/rlrun/app
COPY --chown=rlrun:rlrun pyproject.toml README.md ./
COPY --chown=rlrun:rlrun rlrun ./rlrun
COPY --chown=rlrun:rlrun conf ./conf
# torch comes from the base image; pip keeps it because it satisfies torch>=2.4.
RUN pip install --no-cache-dir ".[sweep]" && mkdir -p outputs && chown rlrun:rlrun outputs
USER rlrun
VOLUME ["/home/rlrun/app/outputs"]
CMD ["python", "-m", "rlrun.doctor"]
