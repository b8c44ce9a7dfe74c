"""The run configuration's sections: one plain dataclass per TOML section, and `Config` that holds them. Each field's
type declares what it accepts (its range: config.schema, which checks it)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Annotated, Literal

from msgspec import Meta

from jepa_core.config.rules import RulesConfig
from jepa_core.config.schema import (AtLeast1, AtLeast2, Fraction, FractionBelow1, NonEmpty, NonNegative, OpenFraction,
                                     Pair, Positive, Rate)

SinCosWidth = Annotated[int, Meta(gt=0, multiple_of=4, description="2-D sin-cos positions")]
Workers = Annotated[int, Meta(ge=0, le=256)]  # more DataLoader processes than any machine has cores is a typo
Device = Annotated[str, Meta(pattern=r"^(auto|cpu|cuda|mps|cuda:.*)$", description="auto, cpu, cuda, cuda:N or mps")]


@dataclass
class ModelConfig:
    img_size: Positive[int] = 32  # input images are resized to img_size x img_size pixels
    patch_size: Positive[int] = 4  # side of a square patch, in pixels: (img_size / patch_size)^2 tokens per image
    in_chans: Positive[int] = 3  # input channels (3 for RGB)
    embed_dim: SinCosWidth = 96  # width of the encoders' tokens (the features the rules read)
    depth: Positive[int] = 4  # transformer blocks in each encoder
    num_heads: Positive[int] = 4  # attention heads in each encoder block
    mlp_ratio: Positive[float] = 4.0  # hidden width of the blocks' MLP, as a multiple of the token width
    pred_dim: SinCosWidth = 48  # width of the predictor's tokens
    pred_depth: Positive[int] = 2  # transformer blocks in the predictor
    pred_num_heads: Positive[int] = 4  # attention heads in each predictor block


@dataclass
class DataConfig:
    dataset: Literal["shapes", "folder", "npz"] = "shapes"  # the built-in shapes, an image folder or an .npz archive
    path: str = ""  # folder of images (one subfolder per class, or none) or .npz archive; unused by the shapes
    num_classes: Positive[int] = 6  # shape classes drawn by the built-in dataset (labels for the kNN and the probe)
    num_train: Positive[int] = 16384  # training images of the built-in dataset (folder / npz: capped at what is there)
    num_heldout: Positive[int] = 2048  # held-out images the evaluation scores (the shapes draw them fresh)
    heldout_fraction: OpenFraction = 0.2  # folder / npz only: the shapes dataset draws its held-out split fresh
    # The input pipeline (jepa_core/data). Workers build whole batches ahead of the step; 0 builds them in the
    # training process (right for the in-memory shapes on CPU, and for a notebook that must not fork).
    num_workers: Workers = 0
    prefetch_factor: AtLeast1 = 2  # batches each worker keeps ready
    # I-JEPA's augmentation of folder / npz images (the shapes are used as rendered): RandomResizedCrop's area
    # fraction and aspect-ratio range, an optional horizontal flip, and JPEG draft decoding at a reduced scale.
    crop_scale: Pair[Rate] = field(default_factory=lambda: [0.3, 1.0])
    # RandomResizedCrop's aspect-ratio range [min, max]
    crop_ratio: Pair[Positive[float]] = field(default_factory=lambda: [0.75, 4 / 3])
    hflip: bool = False  # flip folder / npz images horizontally at random
    # decode JPEGs at a reduced scale when the crop allows it (faster, same pixels after resize)
    jpeg_draft: bool = True


@dataclass
class MaskConfig:
    num_targets: Positive[int] = 4  # target blocks per image (the predictor's regression targets)
    # area of each target block, as a fraction of the image [min, max]
    target_scale: Pair[OpenFraction] = field(default_factory=lambda: [0.15, 0.2])
    # aspect ratio of each target block [min, max]
    target_aspect: Pair[Positive[float]] = field(default_factory=lambda: [0.75, 1.5])
    # area of the context block before the targets are removed from it [min, max]
    context_scale: Pair[Rate] = field(default_factory=lambda: [0.85, 1.0])
    # aspect ratio of the context block [min, max]
    context_aspect: Pair[Positive[float]] = field(default_factory=lambda: [1.0, 1.0])
    min_keep: Positive[int] = 4  # fewest patches a context or a target block may keep


@dataclass
class OptimConfig:
    steps: Positive[int] = 1000  # optimizer updates in the run: the schedules' length
    batch_size: Positive[int] = 128  # images per update, over all processes
    lr: Positive[float] = 1e-3  # peak learning rate, reached at the end of the warm-up
    start_lr: NonNegative[float] = 1e-4  # learning rate at step 0, rising linearly to lr over the warm-up
    final_lr: NonNegative[float] = 1e-5  # learning rate at the last step, after a cosine decay from lr
    warmup_steps: NonNegative[int] = 50  # steps of the linear learning-rate warm-up
    # AdamW weight decay at step 0 (matrices only), rising by a cosine to final_weight_decay
    weight_decay: NonNegative[float] = 0.04
    final_weight_decay: NonNegative[float] = 0.4  # weight decay at the last step
    beta1: FractionBelow1 = 0.9  # AdamW's first-moment decay
    beta2: FractionBelow1 = 0.95  # AdamW's second-moment decay
    grad_clip: NonNegative[float] = 1.0  # 0 turns clipping off; grad_norm is always logged before clipping
    loss: Literal["smooth_l1", "mse"] = "smooth_l1"  # the loss between predicted and target features
    gns_microbatches: Positive[int] = 2  # micro-batches used for the gradient noise scale, at its cadence only


@dataclass
class EMAConfig:
    # EMA momentum of the target encoder at step 0 (1 keeps the target fixed, 0 copies the online encoder)
    start: Fraction = 0.996
    end: Fraction = 1.0  # EMA momentum at the last step
    schedule: Literal["linear", "cosine"] = "linear"  # how the momentum goes from start to end


@dataclass
class DiagnosticsConfig:
    basic_every_steps: Positive[int] = 20  # loss, lr, gradient norm, timings and memory, every this many steps
    # spread and agreement of the target and predictor features on the training batch
    representation_every_steps: Positive[int] = 20
    # The target and the online encoder on one fixed probe batch of eight images (two small forwards): the
    # noise-free signal the collapse and EMA rules lean on. It was read with the parameter distance (500 here) until
    # the detection library's round 9: at 250, collapses that continued a first descent went unseen.
    fixed_batch_every_steps: Positive[int] = 20
    # RankMe of pooled and token features, covariance (SVDs: the costly group)
    covariance_every_steps: Positive[int] = 500
    param_distance_every_steps: Positive[int] = 500  # distance between the target and the online encoder's weights
    # context and target sizes and their overlap (a leak), target parameters holding a gradient
    mask_check_every_steps: Positive[int] = 20
    # gradient cosine and noise scale, stable rank, drift from the initial weights, update ratio
    weights_health_every_steps: Positive[int] = 500
    eval_every_steps: Positive[int] = 500  # kNN and linear probe on the held-out split (and at the last step)


@dataclass
class EvalConfig:
    knn_k: Positive[int] = 20  # neighbours the kNN classifier votes with
    # L-BFGS iterations of the linear probe on the frozen features (fewer leave trained features under-fitted
    # before random ones: 20 scored a digits encoder 9 points below random init where 100 scored it level).
    probe_epochs: Positive[int] = 100
    at_start: bool = True  # step-0 evaluation gives the random-init baseline
    # At the step-0 evaluation, the held-out split is also scored on this many other random halvings: their spread is
    # the measured noise of one evaluation (knn/accuracy_noise, linear_probe/val_acc_noise), which the eval_regression
    # rule judges falls against. 0 leaves it out (the rule then assumes binomial noise on the probe-val half).
    noise_splits: NonNegative[int] = 8
    # LiDAR (target/lidar), label-free, at each evaluation: this many held-out images, each seen through
    # lidar_views context masks by the target encoder (the SSL task's own views; fixed masks, so only the model
    # changes between readings). 0 leaves it out.
    lidar_images: NonNegative[int] = 256
    lidar_views: AtLeast2 = 4  # context masks each LiDAR image is seen through (its views)
    artifacts: bool = True  # mask overlay and nearest-neighbour PNGs at evaluation cadence


@dataclass
class LoggingConfig:
    runs_dir: NonEmpty = "runs"  # folder the run directory is created in
    name: str = ""  # empty: a timestamped name
    log_every_steps: Positive[int] = 20  # console line
    progress_bar: bool = True  # a tqdm progress bar on the console (jepa train)
    jsonl: bool = True  # write metrics.jsonl, the canonical stream every view reads
    tensorboard: bool = True  # mirror the rows to TensorBoard event files in tensorboard/
    wandb: bool = False  # mirror the rows to Weights & Biases (the package must be installed)
    trackio: bool = False  # mirror the rows to trackio (the package must be installed)
    checkpoint_every_steps: Positive[int] = 500  # write a checkpoint every this many steps (and at the last)
    # newest step_*.pt kept; 0 keeps every one (to rewind to any of them). Also kept: those a rule window before the
    # newest (an alert there could be rewound from) and, for good, the one before each alert (meta.json lists them).
    keep_checkpoints: NonNegative[int] = 3


@dataclass
class RuntimeConfig:
    device: Device = "auto"  # auto | cpu | cuda | cuda:N | mps
    seed: int = 0  # seeds the weights, the batches and the masks: a run is a pure function of it
    precision: Literal["auto", "fp32", "bf16"] = "auto"  # auto (bf16 autocast on CUDA, fp32 elsewhere) | fp32 | bf16
    num_threads: NonNegative[int] = 0  # 0 leaves torch's default
    compile: bool = False  # torch.compile the encoders and predictor of the training step (first steps compile)


@dataclass
class FaultsConfig:
    """Failures reproduced on purpose (design §8). All off by default; each starts at `start_step`."""

    start_step: NonNegative[int] = 0  # update index from which every switched-on fault acts
    mask_leak_fraction: Fraction = 0.0  # fraction of target patches copied into the context
    frozen_target: bool = False  # the target encoder is never updated
    target_copies_online: bool = False  # EMA momentum 0: target = online every step
    target_gradients: bool = False  # the target forward keeps its graph and its parameters train
    lr_blowup_factor: Positive[float] = 1.0  # lr multiplied by this from start_step
    collapse_weight: NonNegative[float] = 0.0  # a loss term that pulls every context feature to the batch mean

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
# The one list of cadence keys (design §6). The metric registry (jepa_core.metrics.registry, a layer above) checks its
# groups against it; live control (control.json), the config check and the notebooks' sliders accept exactly these.
CADENCE_KEYS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(DiagnosticsConfig)
                                      if f.name.endswith("_every_steps"))
