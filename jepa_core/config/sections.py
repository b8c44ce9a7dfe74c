"""The run configuration's sections: one plain dataclass per TOML section, and `Config` that holds them."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from jepa_core.config.rules import RulesConfig


class ConfigError(ValueError):
    """A config file, key or value that cannot be used; the message names it."""


@dataclass
class ModelConfig:
    img_size: int = 32
    patch_size: int = 4
    in_chans: int = 3
    embed_dim: int = 96
    depth: int = 4
    num_heads: int = 4
    mlp_ratio: float = 4.0
    pred_dim: int = 48
    pred_depth: int = 2
    pred_num_heads: int = 4


@dataclass
class DataConfig:
    dataset: str = "shapes"  # shapes | folder | npz
    path: str = ""
    num_classes: int = 6
    num_train: int = 16384
    num_heldout: int = 2048
    heldout_fraction: float = 0.2  # folder / npz only: the shapes dataset draws its held-out split fresh
    # The input pipeline (jepa_core/data). Workers build whole batches ahead of the step; 0 builds them in the
    # training process (right for the in-memory shapes on CPU, and for a notebook that must not fork).
    num_workers: int = 0
    prefetch_factor: int = 2  # batches each worker keeps ready
    # I-JEPA's augmentation of folder / npz images (the shapes are used as rendered): RandomResizedCrop's area
    # fraction and aspect-ratio range, an optional horizontal flip, and JPEG draft decoding at a reduced scale.
    crop_scale: list[float] = field(default_factory=lambda: [0.3, 1.0])
    crop_ratio: list[float] = field(default_factory=lambda: [0.75, 4 / 3])
    hflip: bool = False
    jpeg_draft: bool = True


@dataclass
class MaskConfig:
    num_targets: int = 4
    target_scale: list[float] = field(default_factory=lambda: [0.15, 0.2])
    target_aspect: list[float] = field(default_factory=lambda: [0.75, 1.5])
    context_scale: list[float] = field(default_factory=lambda: [0.85, 1.0])
    context_aspect: list[float] = field(default_factory=lambda: [1.0, 1.0])
    min_keep: int = 4


@dataclass
class OptimConfig:
    steps: int = 1000
    batch_size: int = 128
    lr: float = 1e-3
    start_lr: float = 1e-4
    final_lr: float = 1e-5
    warmup_steps: int = 50
    weight_decay: float = 0.04
    final_weight_decay: float = 0.4
    beta1: float = 0.9
    beta2: float = 0.95
    grad_clip: float = 1.0  # 0 turns clipping off; grad_norm is always logged before clipping
    loss: str = "smooth_l1"  # smooth_l1 | mse
    gns_microbatches: int = 2  # micro-batches used for the gradient noise scale, at its cadence only


@dataclass
class EMAConfig:
    start: float = 0.996
    end: float = 1.0
    schedule: str = "linear"  # linear | cosine


@dataclass
class DiagnosticsConfig:
    basic_every_steps: int = 20
    representation_every_steps: int = 20
    # The target and the online encoder on one fixed probe batch of eight images (two small forwards): the
    # noise-free signal the collapse and EMA rules lean on. It was read with the parameter distance (500 here) until
    # the detection library's round 9: at 250, collapses that continued a first descent went unseen.
    fixed_batch_every_steps: int = 20
    covariance_every_steps: int = 500
    param_distance_every_steps: int = 500
    mask_check_every_steps: int = 20
    weights_health_every_steps: int = 500
    eval_every_steps: int = 500


@dataclass
class EvalConfig:
    knn_k: int = 20
    probe_epochs: int = 100
    at_start: bool = True  # step-0 evaluation gives the random-init baseline
    # At the step-0 evaluation, the held-out split is also scored on this many other random halvings: their spread is
    # the measured noise of one evaluation (knn/accuracy_noise, linear_probe/val_acc_noise), which the eval_regression
    # rule judges falls against. 0 leaves it out (the rule then assumes binomial noise on the probe-val half).
    noise_splits: int = 8
    # LiDAR (target/lidar), label-free, at each evaluation: this many held-out images, each seen through
    # lidar_views context masks by the target encoder (the SSL task's own views; fixed masks, so only the model
    # changes between readings). 0 leaves it out.
    lidar_images: int = 256
    lidar_views: int = 4
    artifacts: bool = True  # mask overlay and nearest-neighbour PNGs at evaluation cadence


@dataclass
class LoggingConfig:
    runs_dir: str = "runs"
    name: str = ""  # empty: a timestamped name
    log_every_steps: int = 20  # console line
    progress_bar: bool = True
    jsonl: bool = True
    tensorboard: bool = True
    wandb: bool = False
    trackio: bool = False
    checkpoint_every_steps: int = 500
    # newest step_*.pt kept; 0 keeps every one (to rewind to any of them). Also kept: those a rule window before the
    # newest (an alert there could be rewound from) and, for good, the one before each alert (meta.json lists them).
    keep_checkpoints: int = 3


@dataclass
class RuntimeConfig:
    device: str = "auto"  # auto | cpu | cuda | cuda:N | mps
    seed: int = 0
    precision: str = "auto"  # auto (bf16 autocast on CUDA, fp32 elsewhere) | fp32 | bf16
    num_threads: int = 0  # 0 leaves torch's default
    compile: bool = False  # torch.compile the encoders and predictor of the training step (first steps compile)


@dataclass
class FaultsConfig:
    """Failures reproduced on purpose (SPEC §8). All off by default; each starts at `start_step`."""

    start_step: int = 0
    mask_leak_fraction: float = 0.0  # fraction of target patches copied into the context
    frozen_target: bool = False  # the target encoder is never updated
    target_copies_online: bool = False  # EMA momentum 0: target = online every step
    target_gradients: bool = False  # the target forward keeps its graph and its parameters train
    lr_blowup_factor: float = 1.0  # lr multiplied by this from start_step
    collapse_weight: float = 0.0  # a loss term that pulls every context feature to the batch mean

    def active(self) -> list[str]:
        on = []
        if self.mask_leak_fraction > 0:
            on.append("mask_leak")
        if self.frozen_target:
            on.append("frozen_target")
        if self.target_copies_online:
            on.append("target_copies_online")
        if self.target_gradients:
            on.append("target_gradients")
        if self.lr_blowup_factor != 1.0:
            on.append("lr_blowup")
        if self.collapse_weight > 0:
            on.append("collapse")
        return on


@dataclass
class Config:
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    masks: MaskConfig = field(default_factory=MaskConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    ema: EMAConfig = field(default_factory=EMAConfig)
    diagnostics: DiagnosticsConfig = field(default_factory=DiagnosticsConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    logging: LoggingConfig = field(default_factory=LoggingConfig)
    runtime: RuntimeConfig = field(default_factory=RuntimeConfig)
    faults: FaultsConfig = field(default_factory=FaultsConfig)
    rules: RulesConfig = field(default_factory=RulesConfig)


SECTIONS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(Config))
# The one list of cadence keys (SPEC §6). The metric registry (jepa_core.metrics.registry, a layer above) checks its
# groups against it; live control (control.json), validation and the notebooks' sliders accept exactly these.
CADENCE_KEYS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(DiagnosticsConfig)
                                      if f.name.endswith("_every_steps"))
