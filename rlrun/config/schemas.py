"""Typed schemas for every config group, registered in Hydra's ConfigStore.

These dataclasses are the one place that holds defaults: an option YAML under conf/ states only what
differs, and names its schema in `defaults:` where a group has several (buffer, optimizer), so a wrong
type fails at composition with the key named. Value checks that types cannot express (ranges,
cross-key rules) live in `validate()`, which runs before anything is built or written.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, OmegaConf

from rlrun.algos import ALGORITHMS
from rlrun.config.pbt import PBTConfig
from rlrun.config.runnames import job_subdir, run_part, safe


@dataclass
class AtariConfig:
    """ALE preprocessing (Machado et al. 2018 / Nature DQN settings); sticky actions as the env id sets them."""

    noop_max: int = 30
    frame_skip: int = 4  # with max-pooling over the last two frames
    screen_size: int = 84  # grayscale, resized to screen_size x screen_size
    terminal_on_life_loss: bool = True  # training envs only (the game goes on); evaluation plays whole games
    backend: str = "vector"  # vector (ale-py's C++ AtariVectorEnv) | gymnasium (AtariPreprocessing, env.vectorization)
    threads: int | None = None  # vector backend's emulator threads; null = one per CPU the process may use
    # FIRE for the first 2 agent steps of every life: auto = the games that stand still until it (Breakout,
    # Bowling, ...; rlrun.envs.atari.FIRE_TO_START) | true = every game with FIRE | false = never
    fire_reset: str = "auto"
    repeat_action_probability: float | None = None  # sticky actions' chance per frame; null: the id's (v5: 0.25)


@dataclass
class EnvConfig:
    id: str = "CartPole-v1"  # gymnasium env id (env=X chooses an env with its tuned learner settings)
    num_envs: int = 1  # sub-envs stepped together per agent (a vector env)
    # auto: `vector` where rlrun has it (CartPole-v1: rlrun.envs.cartpole, the same numbers as sync), else sync
    vectorization: str = "auto"  # auto | sync | async | vector
    # null: gymnasium's spec.reward_threshold for this id; a number overrides it.
    reward_threshold: float | None = None
    # null: the env's registered time limit.
    max_episode_steps: int | None = None
    # Reward shaping for learning only; logged returns are always the env's raw rewards.
    reward_scale: float = 1.0  # multiply rewards by this
    normalize_reward: bool = False  # divide by a running std of the discounted return (gymnasium's NormalizeReward)
    clip_reward: float | None = None  # then clip to [-clip_reward, clip_reward]
    # Discretise a continuous (Box) action space into this many values per dimension; null = keep it.
    action_bins: int | None = None
    frame_stack: int = 0  # > 0: stack that many frames (pixel envs); each frame is stored once in replay
    atari: AtariConfig | None = None  # set for ALE games (env=atari)


@dataclass
class QNetworkConfig:
    _target_: str = "rlrun.nets.networks.QNetwork"
    hidden_sizes: list[int] = field(default_factory=lambda: [128, 128])  # widths of the hidden layers
    dueling: bool = False  # separate value and advantage streams (Wang et al. 2016)
    layer_norm: bool = True  # LayerNorm after each hidden layer
    conv_layer_norm: bool = False  # LayerNorm over each convolution's (C, H, W) output (CleanRL's pqn_atari)
    activation: str = "relu"  # relu | tanh | elu | gelu
    encoder: str = "mlp"  # mlp | nature_cnn, der_cnn (stacked frames: Nature DQN's, DER's) | minatar_cnn (grids)
    num_atoms: int = 1  # > 1: C51 distributional head over linspace(v_min, v_max, num_atoms)
    v_min: float = -10.0  # C51 support: lowest return
    v_max: float = 10.0  # C51 support: highest return
    noisy: bool = False  # factorised Gaussian noisy layers instead of epsilon-greedy
    noisy_sigma0: float = 0.5  # initial noise scale of noisy layers
    init: str = "default"  # default | xavier | orthogonal
    # Quantile networks (network=qrdqn, network=iqn), trained with algo.loss=quantile_huber.
    num_quantiles: int = 0  # > 0: QR-DQN head with that many fixed quantile fractions
    tau_embedding_dim: int = 0  # > 0: IQN; sampled fractions tau embedded through that many cosines
    iqn_acting_taus: int = 32  # IQN's K: evenly spaced fractions whose mean quantile is Q (acting, a*)


@dataclass
class UniformBufferConfig:
    _target_: str = "rlrun.replay.ReplayBuffer"
    capacity: int = 100_000  # transitions kept per agent (oldest dropped first)
    n_step: int = 3  # n-step returns (1 = plain one-step TD)
    augment: str = "none"  # none | random_shift (DrQ: sampled images shifted, edges repeated; rlrun.replay.augment)
    augment_pad: int = 4  # random_shift's largest shift in pixels, each way
    augment_intensity: float = 0.0  # random_shift then scales each image by 1 + this * clip(N(0, 1), -2, 2)


@dataclass
class PrioritizedBufferConfig(UniformBufferConfig):
    _target_: str = "rlrun.replay.PrioritizedReplayBuffer"
    alpha: float = 0.6  # priority exponent: sample with p_i^alpha (0 = uniform)
    beta_start: float = 0.4  # importance-sampling exponent at the start
    # env steps over which beta anneals linearly to 1; null = the whole run (total_steps).
    beta_anneal_steps: int | None = None
    priority_eps: float = 1e-6  # added to |TD error| so every transition can be drawn


@dataclass
class AdamConfig:
    _target_: str = "torch.optim.Adam"
    _partial_: bool = True
    lr: float = 2e-3  # learning rate (at the start; see algo.lr_end_factor)
    eps: float = 1e-8  # Adam's epsilon
    weight_decay: float = 0.0  # L2 penalty
    fused: bool | None = True  # one fused kernel for the whole step (CPU and CUDA); null = torch's choice


@dataclass
class RMSpropConfig:
    _target_: str = "torch.optim.RMSprop"
    _partial_: bool = True
    lr: float = 2.5e-4  # learning rate (at the start; see algo.lr_end_factor)
    alpha: float = 0.95  # smoothing constant of the squared-gradient average
    eps: float = 1e-2  # RMSprop's epsilon
    momentum: float = 0.0  # momentum factor
    centered: bool = True  # normalise by the gradient's estimated variance


@dataclass
class SGDConfig:
    _target_: str = "torch.optim.SGD"
    _partial_: bool = True
    lr: float = 1e-2  # learning rate (at the start; see algo.lr_end_factor)
    momentum: float = 0.9  # momentum factor
    nesterov: bool = False  # Nesterov momentum
    weight_decay: float = 0.0  # L2 penalty


@dataclass
class DeviceConfig:
    type: str = "auto"  # auto | cpu | cuda
    threads: int | None = 1  # torch intra-op threads; null: torch's default (one per core). rlrun/training/device.py
    amp: str = "none"  # none | bf16 (autocast) | fp16 (autocast + GradScaler)
    channels_last: bool | None = None  # one agent's frame CNN channels-last; null: nature_cnn on the CPU (faster)
    compile: bool = False  # torch.compile the loss computation (forward, target, loss; backward via AOT)
    compile_optimizer: bool = False  # torch.compile the optimizer step (RMSprop, SGD: torch has no fused kernel)
    compile_mode: str = "default"  # default | reduce-overhead | max-autotune
    cuda_graphs: bool = False  # CUDA only: record each update phase and the greedy forward as CUDA graphs


@dataclass
class ExplorationConfig:
    schedule: str = "linear"  # linear | exponential
    start: float = 1.0  # the schedule's epsilon at env step 0; until algo.learning_starts epsilon is 1.0
    end: float = 0.01  # epsilon from env step `duration` on
    duration: int = 10_000  # env steps, counted from step 0, over which epsilon goes from `start` to `end`


@dataclass
class EvalConfig:
    interval: int = 10_000  # env steps between greedy evaluations; 0 disables
    episodes: int = 5  # greedy episodes per evaluation
    # Envs per agent that play them (at most one per episode), each its fixed share one after another; null:
    # one env per episode (an evaluation then lasts its longest episode, every env stepped until then; the
    # Atari 100k presets take 10)
    num_envs: int | None = None
    # The chance of a uniform random action at each evaluation step. 0: greedy. The Atari 100k presets take
    # Dopamine's 0.001, so that no policy stalls a game for its whole episode cap (Breakout waits for FIRE).
    epsilon: float = 0.0


@dataclass
class LogConfig:
    interval: int = 1_000  # env steps between scalar logs
    progress_bar: bool | None = None  # null: only when stderr is a terminal
    # Seconds of wall time between plain progress lines (step, episodes, returns, step/s, ETA), printed where
    # the bar is not (stderr not a terminal, or progress_bar=false); 0: one at every log.interval
    progress_interval: float = 30.0
    plot: bool = True  # write returns.png at the end


@dataclass
class CheckpointConfig:
    every: int = 10_000  # env steps between checkpoints (0: only at the end and on SIGTERM/SIGINT)
    replay: bool = True  # include the replay buffer (large buffers may prefer false)


@dataclass
class TensorBoardLoggerConfig:
    """logger=tensorboard: events.out.tfevents.* in the run directory (its scalars, config and hparams)."""


@dataclass
class MLflowLoggerConfig:
    """logger=mlflow: one MLflow run per agent (the `mlflow` extra)."""

    # null: $MLFLOW_TRACKING_URI if set, else a SQLite store in <run dir>/mlruns/ (nothing written elsewhere)
    tracking_uri: str | None = None
    experiment: str | None = None  # MLflow experiment name; null: exp_name


@dataclass
class WandbLoggerConfig:
    """logger=wandb: one Weights & Biases run per agent, files in <run dir>/wandb/ (the `wandb` extra)."""

    mode: str | None = None  # online | offline | disabled; null: online once `wandb login` was run, else offline
    project: str = "rlrun"  # W&B project
    entity: str | None = None  # W&B team or user; null: your default entity


@dataclass
class CsvLoggerConfig:
    """logger=csv: every scalar as a row `step,tag,value` of scalars.csv in the run directory."""


@dataclass
class LoggerConfig:
    """The logging backends of a run: the options chosen in the `logger` group (null = not chosen)."""

    tensorboard: TensorBoardLoggerConfig | None = None
    mlflow: MLflowLoggerConfig | None = None
    wandb: WandbLoggerConfig | None = None
    csv: CsvLoggerConfig | None = None


@dataclass
class RunConfig:
    env: EnvConfig = field(default_factory=EnvConfig)
    network: QNetworkConfig = field(default_factory=QNetworkConfig)
    buffer: Any = MISSING  # uniform or prioritized: the option names its schema
    optimizer: Any = MISSING  # Adam, RMSprop or SGD: the option names its schema
    device: DeviceConfig = field(default_factory=DeviceConfig)
    algo: Any = MISSING  # the algorithm's own schema (rlrun.algos): the option (algo=dqn|pqn|...) names it
    exploration: ExplorationConfig = field(default_factory=ExplorationConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    log: LogConfig = field(default_factory=LogConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    logger: LoggerConfig = field(default_factory=LoggerConfig)  # logger=tensorboard|mlflow|wandb|csv, or a list
    resume: str | None = None  # a run directory to continue
    # Experiment name: part of the run directory's name (and the MLflow experiment); null: the algorithm's
    # name (dqn, pqn, mdqn: `experiment_name`).
    exp_name: str | None = None
    seed: int = 0  # seed of the run (of its first agent with seeds > 1)
    # Agents trained together in this process (rlrun.training.population): seeds seed, seed+1, ..., seed+seeds-1.
    seeds: int = 1
    # Agents with values of their own (rlrun.training.agents): a mapping per agent, {seed: 1, optimizer.lr: 1e-3}.
    agents: list[Any] = field(default_factory=list)
    total_steps: int = 100_000  # env steps per agent, rounded up to whole vector steps (a multiple of env.num_envs)
    pbt: PBTConfig | None = None  # population-based training of the agents (+pbt=truncation: rlrun.config.pbt)
    stop_on_solve: bool = False  # stop once the 100-episode mean reaches env.reward_threshold
    # What a sweep job returns to its sweeper (Optuna): final_mean_return_100 (the agents' mean of it), or
    # robust (for tuning over many seeds, `seeds=K`: rlrun.storage.summary.robust_score).
    objective: str = "final_mean_return_100"


def experiment_name(exp_name: object, algo_kind: object = "dqn") -> str:
    """`exp_name`, or the algorithm's name where it is null (the resolver `rlrun_exp_name` for the run dir)."""
    return str(exp_name) if exp_name is not None else str(algo_kind)


def register_configs() -> None:
    """The schemas (in Hydra's ConfigStore) and the resolvers that conf/config.yaml uses; idempotent."""
    names = [*SCHEMAS, *(f"schema_algo_{algo.name}" for algo in ALGORITHMS.values())]
    cs = ConfigStore.instance()
    if all(f"{n}.yaml" in cs.repo for n in names) and all(OmegaConf.has_resolver(r) for r in RESOLVERS):
        return
    for name, resolver in RESOLVERS.items():
        OmegaConf.register_new_resolver(name, resolver, replace=True)
    # Stored at the root (not in a group) so that `--help` lists only the real option groups.
    for name, node in SCHEMAS.items():
        cs.store(name=name, node=node)
    for algo in ALGORITHMS.values():  # each algorithm's own schema (rlrun.algos): conf/algo/<name>.yaml links it
        cs.store(name=f"schema_algo_{algo.name}", node=algo.schema)


RESOLVERS: dict[str, Any] = {
    "rlrun_slug": lambda s: str(s).replace("/", "-"),
    # Run-dir part naming the seeds: seed3, or seeds3-10 for a batched run of 8.
    "rlrun_seeds": lambda seed, n: f"seed{seed}" if int(n) == 1 else f"seeds{seed}-{int(seed) + int(n) - 1}",
    # Run and sweep-job names after what differs from the defaults, exp_name safe (rlrun.config.runnames).
    "rlrun_overrides": run_part,
    "rlrun_job_dir": lambda *, _root_: job_subdir(_root_),
    "rlrun_exp_name": lambda e, a="dqn": safe(experiment_name(e, a)),
}
SCHEMAS = {
    "schema_run": RunConfig,
    "schema_env": EnvConfig,
    "schema_q_network": QNetworkConfig,
    "schema_uniform_buffer": UniformBufferConfig,
    "schema_prioritized_buffer": PrioritizedBufferConfig,
    "schema_adam": AdamConfig,
    "schema_rmsprop": RMSpropConfig,
    "schema_sgd": SGDConfig,
    "schema_device": DeviceConfig,
}


# The only classes a config may name in `_target_`, per group, with the schema of each. A config read from
# a run directory or a checkpoint is checked against these (`rlrun.config.validate.check_schema`) and rebuilt on
# them (`from_saved`), so nothing read from disk chooses which code runs.
GROUP_TARGETS: dict[str, dict[str, type]] = {
    "network": {"rlrun.nets.networks.QNetwork": QNetworkConfig},
    "buffer": {
        "rlrun.replay.ReplayBuffer": UniformBufferConfig,
        "rlrun.replay.PrioritizedReplayBuffer": PrioritizedBufferConfig,
    },
    "optimizer": {"torch.optim.Adam": AdamConfig, "torch.optim.RMSprop": RMSpropConfig, "torch.optim.SGD": SGDConfig},
}
