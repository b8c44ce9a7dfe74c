"""The settings of the detection library (design §7, §8): what a user might run, each on top of the tiny preset
(what a setting holds is setting.py). Those of rounds 1-25 are here, the later ones in library_settings_recent.py; SETTINGS
joins both. Which round introduced each, and which seeds later rounds added, is research/rounds.py.
"""

from __future__ import annotations

from library_settings_recent import RECENT_SETTINGS
from setting import Setting, cadences  # noqa: F401 (Setting: re-exported for cases.py)

# batch32's choices but the fixed batch's cadence: a batch of 32, the lr and warm-up, four targets, cadences 25/250.
_BATCH32 = ("optim.batch_size=32", "optim.lr=4e-4", "optim.warmup_steps=100", "optim.steps=1000",
            "masks.num_targets=4", "diagnostics.basic_every_steps=25", "diagnostics.representation_every_steps=25",
            "diagnostics.mask_check_every_steps=25", "diagnostics.covariance_every_steps=250",
            "diagnostics.param_distance_every_steps=250", "diagnostics.weights_health_every_steps=250",
            "diagnostics.eval_every_steps=100", "logging.checkpoint_every_steps=250")

SETTINGS = (
    # What a user runs: the tiny preset as shipped, full length; only the evaluation is denser (every 100 steps,
    # not 400) so that the evaluation baseline and the harm labels have readings. Evaluation does not move the
    # trajectory: it uses its own generators (checked: identical losses either way).
    Setting("tiny", ("diagnostics.eval_every_steps=100",), 1600, (400, 800, 1200), 200,
            "tiny preset as shipped (batch 64, 1600 steps, lr 5e-4, cadences 10/20/25)"),
    # The settings the first thresholds were calibrated on (batch 128, 300 steps, dense cadences).
    Setting("calib", ("optim.batch_size=128", "optim.lr=7e-4", "optim.warmup_steps=50", "data.num_train=16384",
                      "data.num_heldout=2048", "diagnostics.basic_every_steps=5",
                      "diagnostics.representation_every_steps=5", "diagnostics.covariance_every_steps=10",
                      "diagnostics.param_distance_every_steps=10", "diagnostics.fixed_batch_every_steps=10",
                      "diagnostics.mask_check_every_steps=5",
                      "diagnostics.eval_every_steps=25", "eval.probe_epochs=20", "optim.steps=300",
                      "logging.checkpoint_every_steps=75"),
            300, (75, 150, 225), 150, "calibration settings (batch 128, 300 steps, lr 7e-4, cadences 5/10)"),
    # A user's quick look: a quarter of the steps, twice the lr, I-JEPA's four target blocks. Never tuned on.
    Setting("quick", ("optim.steps=400", "optim.warmup_steps=40", "optim.lr=1e-3", "masks.num_targets=4",
                      "diagnostics.eval_every_steps=50", "logging.checkpoint_every_steps=400"),
            400, (), None, "tiny, 400 steps, lr 1e-3, 4 target blocks (healthy runs only)"),
    # Never tuned on: a user who lowers the lr to 3e-4 (the plateau of the preset's lr sweep), fits a smaller batch
    # and stops at 1000 steps. The preset's cadences, so readings fall on other steps of the schedule.
    Setting("holdout", ("optim.lr=3e-4", "optim.batch_size=48", "optim.warmup_steps=60",
                        "diagnostics.eval_every_steps=100", "logging.checkpoint_every_steps=250"),
            1000, (250, 500, 750), 200, "tiny, batch 48, 1000 steps, lr 3e-4", round=2),
    # Never tuned on: a user who widens the encoder (128, predictor 64 wide and 3 deep, as I-JEPA's predictors are
    # deeper than the tiny one) and, with more parameters, lowers the lr to 4e-4 for 800 steps.
    Setting("wide", ("model.embed_dim=128", "model.pred_dim=64", "model.pred_depth=3", "optim.lr=4e-4",
                     "optim.warmup_steps=60", "diagnostics.eval_every_steps=100",
                     "logging.checkpoint_every_steps=200"),
            800, (200, 400, 600), 200, "tiny, encoder 128 wide, predictor 64x3, 800 steps, lr 4e-4",
            round=3),
    # Never tuned on: a user who lets the target follow faster (EMA momentum from 0.99, BYOL's range, not I-JEPA's
    # 0.996), raises the lr to 6e-4 with a longer warm-up and stops at 1000 steps.
    Setting("momentum", ("ema.start=0.99", "optim.lr=6e-4", "optim.warmup_steps=100", "optim.steps=1000",
                         "diagnostics.eval_every_steps=100", "logging.checkpoint_every_steps=250"),
            1000, (250, 500, 750), 200, "tiny, EMA momentum 0.99 -> 1, lr 6e-4, warm-up 100, 1000 steps",
            round=4),
    # Never tuned on: what a user who leaves the tiny preset's dense cadences for the defaults meets (the large-run
    # cadences of design §6, also the small preset's: readings every 20 steps, covariance, parameter distance and
    # weights health every 500), with I-JEPA's weight-decay ramp to 0.4, a cosine EMA schedule, four target blocks
    # and 1200 steps. Every rule has half the readings per step that it was tuned on, or fewer.
    Setting("sparse", (*cadences(20, 500, 500, 100, 300), "optim.final_weight_decay=0.4", "ema.schedule='cosine'",
                       "masks.num_targets=4", "optim.steps=1200"),
            1200, (300, 600, 900), 200, "tiny, the default (large-run) cadences 20/500, weight decay 0.04 -> 0.4, "
            "cosine EMA, 4 target blocks, 1200 steps", round=5),
    # Never tuned on: a user who changes the masks (two smaller target blocks of 10-15%, a context of 70-90% of the
    # image) and reads at cadences between the preset's and the defaults' (every 20 steps; covariance, parameter
    # distance and weights health every 100), lr 6e-4 for 800 steps.
    Setting("blocks", ("masks.num_targets=2", "masks.target_scale=[0.1, 0.15]", "masks.context_scale=[0.7, 0.9]",
                       "optim.lr=6e-4", "optim.warmup_steps=60", "optim.steps=800", *cadences(20, 100, 100, 100, 200)),
            800, (200, 400, 600), 200, "tiny, 2 target blocks of 10-15%, context 70-90%, lr 6e-4, cadences "
            "20/100, 800 steps", round=6),
    # A user whose memory fits a batch of 32 (the per-batch statistics twice as noisy as at 64),
    # with the lr lowered to 4e-4 and a longer warm-up, I-JEPA's four target blocks, and cadences of 25/250 steps.
    Setting("batch32", _BATCH32 + ("diagnostics.fixed_batch_every_steps=250",),
            1000, (250, 500, 750), 200, "tiny, batch 32, lr 4e-4, warm-up 100, 4 target blocks, cadences 25/250 "
            "(the fixed batch too), 1000 steps", round=7),
    # batch32 as a user meets it since the fixed probe batch has its own cadence: left at its default of 20 when
    # the other cadences move to 25/250. Recorded to study round 8's miss on batch32 (round 9): tuning data.
    Setting("batch32_fb", _BATCH32, 1000, (250, 500, 750), 200, "batch32 with the fixed batch at its default "
            "cadence, every 20 steps", round=9),
    # A user who swaps the smooth-L1 loss for a plain MSE and turns gradient clipping off (I-JEPA's
    # recipe clips nothing), keeps the preset's lr and masks, and reads at cadences of 10/50 steps for 800 steps.
    Setting("mse", ("optim.loss='mse'", "optim.grad_clip=0", "optim.steps=800",
                    "diagnostics.covariance_every_steps=50", "diagnostics.param_distance_every_steps=50",
                    "diagnostics.fixed_batch_every_steps=50",
                    "diagnostics.weights_health_every_steps=50", "diagnostics.eval_every_steps=100",
                    "logging.checkpoint_every_steps=200"),
            800, (200, 400, 600), 200, "tiny, MSE loss, no gradient clipping, cadences 10/50, 800 steps",
            round=8),
    # Never tuned on: a user who leaves every cadence at the large-run defaults of design §6 (readings every 20
    # steps, the fixed batch every 20, covariance, parameter distance and weights health every 500), lets the target
    # follow more slowly (EMA momentum from 0.998), raises the lr to 8e-4 with a warm-up of 100, for 1200 steps.
    Setting("defaults", ("diagnostics.basic_every_steps=20", "diagnostics.representation_every_steps=20",
                         "diagnostics.fixed_batch_every_steps=20", "diagnostics.mask_check_every_steps=20",
                         "diagnostics.covariance_every_steps=500", "diagnostics.param_distance_every_steps=500",
                         "diagnostics.weights_health_every_steps=500", "diagnostics.eval_every_steps=100",
                         "ema.start=0.998", "optim.lr=8e-4", "optim.warmup_steps=100", "optim.steps=1200",
                         "logging.checkpoint_every_steps=100"),
            1200, (200, 500, 1000), 200, "tiny, the large-run default cadences (20, the fixed batch 20, the rest "
            "500), EMA momentum from 0.998, lr 8e-4, warm-up 100, 1200 steps (never tuned on)", round=10,
            # onsets at a sixth, five twelfths and five sixths of the schedule, and magnitudes between and beyond
            # the grid's (collapse 0.3/1/3, lr x3/x10/x1000/x1e6, leak 2%/50%): none was ever tuned on
            magnitudes=(("collapse", (0.5, 2.0)), ("lr_blowup", (5.0, 30.0, 3000.0, 1e5)), ("mask_leak", (0.1,)))),
    # Never tuned on: a user's own small dataset (4,096 training images, 64 steps an epoch, so about eight passes),
    # with the weight decay raised to 0.1 against overfitting, lr 7e-4 after a short warm-up of 50, 500 steps, and
    # cadences no other setting used (representation 15, covariance, parameter distance and weights health 75, the
    # fixed batch at its default 20). Onsets at a quarter, half and three quarters, each trained 125 steps on.
    Setting("smalldata", ("data.num_train=4096", "data.num_heldout=2048", "optim.weight_decay=0.1",
                          "optim.final_weight_decay=0.1", "optim.lr=7e-4", "optim.warmup_steps=50",
                          "optim.steps=500", "diagnostics.representation_every_steps=15",
                          "diagnostics.covariance_every_steps=75", "diagnostics.param_distance_every_steps=75",
                          "diagnostics.weights_health_every_steps=75", "diagnostics.eval_every_steps=50",
                          "logging.checkpoint_every_steps=125"),
            500, (125, 250, 375), 125, "tiny on 4,096 images (about eight epochs), weight decay 0.1, lr 7e-4, "
            "warm-up 50, cadences 10/15/75, 500 steps (never tuned on)", round=11,
            magnitudes=(("collapse", (0.6, 1.5, 5.0)), ("lr_blowup", (4.0, 20.0, 300.0, 1e6)),
                        ("mask_leak", (0.05,)))),
    # Never tuned on: a user who renders the shapes at 48 pixels with 6-pixel patches (the same 8x8 grid of tokens,
    # 2.25x the pixels in each), 16,384 of them, lr 6e-4 after a warm-up of 60, the EMA momentum from 0.995, 600
    # steps, and cadences no other setting used (readings every 12 steps; covariance, parameter distance and weights
    # health every 60; the fixed batch at its default 20).
    Setting("px48", ("model.img_size=48", "model.patch_size=6", "data.num_train=16384", "data.num_heldout=2048",
                     "optim.lr=6e-4", "optim.warmup_steps=60", "optim.steps=600", "ema.start=0.995",
                     "diagnostics.basic_every_steps=12", "diagnostics.representation_every_steps=12",
                     "diagnostics.mask_check_every_steps=12", "diagnostics.covariance_every_steps=60",
                     "diagnostics.param_distance_every_steps=60", "diagnostics.weights_health_every_steps=60",
                     "diagnostics.eval_every_steps=50", "logging.checkpoint_every_steps=150"),
            600, (150, 300, 450), 150, "tiny at 48 px with 6-px patches, 16,384 images, lr 6e-4, EMA from 0.995, "
            "cadences 12/60, 600 steps (never tuned on)", round=12,
            magnitudes=(("collapse", (0.4, 1.2, 4.0)), ("lr_blowup", (6.0, 50.0, 500.0, 1e6)),
                        ("mask_leak", (0.2,)))),
    # Never tuned on: a user who deepens the encoder to 6 blocks and the predictor to 3, lowers the lr to 4e-4 with
    # a warm-up of 40, reads the fixed batch every 30 steps (not its default 20) and the covariance, parameter
    # distance and weights health every 40, for 480 steps.
    Setting("deep", ("model.depth=6", "model.pred_depth=3", "optim.lr=4e-4", "optim.warmup_steps=40",
                     "optim.steps=480", "diagnostics.fixed_batch_every_steps=30",
                     "diagnostics.covariance_every_steps=40", "diagnostics.param_distance_every_steps=40",
                     "diagnostics.weights_health_every_steps=40", "diagnostics.eval_every_steps=40",
                     "logging.checkpoint_every_steps=120"),
            480, (120, 240, 360), 120, "tiny with a 6-block encoder and a 3-block predictor, lr 4e-4, the fixed "
            "batch every 30 steps, cadences 10/40, 480 steps (never tuned on)", round=13,
            magnitudes=(("collapse", (0.45, 1.8, 6.0)), ("lr_blowup", (8.0, 40.0, 800.0, 1e6)),
                        ("mask_leak", (0.35,)))),
    # Never tuned on: a user who warms the lr up for a quarter of a short run (150 of 600 steps, to 8e-4; every
    # tuned setting warmed up for 40-100), with I-JEPA's four target blocks, readings every 15 steps and covariance,
    # parameter distance and weights health every 45 (the fixed batch at its default 20). Its first descent comes
    # later than any tuned on: the per-batch late-fall reference (from step 360) is tested where it is weakest.
    Setting("warmup", ("optim.lr=8e-4", "optim.warmup_steps=150", "optim.steps=600", "masks.num_targets=4",
                       "diagnostics.basic_every_steps=15", "diagnostics.representation_every_steps=15",
                       "diagnostics.mask_check_every_steps=15", "diagnostics.covariance_every_steps=45",
                       "diagnostics.param_distance_every_steps=45", "diagnostics.weights_health_every_steps=45",
                       "diagnostics.eval_every_steps=50", "logging.checkpoint_every_steps=150"),
            600, (150, 300, 450), 150, "tiny with a 150-step lr warm-up to 8e-4, 4 target blocks, cadences 15/45, "
            "600 steps (never tuned on)", round=14,
            magnitudes=(("collapse", (0.35, 1.4, 4.5)), ("lr_blowup", (7.0, 25.0, 600.0, 1e6)),
                        ("mask_leak", (0.08,)))),
    # Never tuned on: a user who narrows the encoder to 64 (the tiny one is 96; four heads of 16) and the predictor
    # to 32, trains at batch 96 with lr 7e-4 after a warm-up of 60 for 700 steps, lets the EMA momentum start at
    # 0.997, and reads at cadences no other setting used: every 14 steps, the fixed batch every 35, covariance,
    # parameter distance and weights health every 70. Onsets at a quarter, half and three quarters, each trained
    # 175 steps on.
    Setting("narrow", ("model.embed_dim=64", "model.pred_dim=32", "optim.batch_size=96", "optim.lr=7e-4",
                       "optim.warmup_steps=60", "optim.steps=700", "ema.start=0.997",
                       *cadences(14, 35, 70, 70, 175)),
            700, (175, 350, 525), 175, "tiny with a 64-wide encoder and a 32-wide predictor, batch 96, lr 7e-4, EMA "
            "from 0.997, the fixed batch every 35 steps, cadences 14/70, 700 steps (never tuned on)", round=15,
            magnitudes=(("collapse", (0.25, 0.8, 2.5)), ("lr_blowup", (12.0, 35.0, 2000.0, 1e6)),
                        ("mask_leak", (0.15,)))),
    # Never tuned on: a user who lets the target follow fast (EMA momentum from 0.99, as `momentum`, whose healthy
    # spread falls by half in its first 200 steps) but warms the lr up for 200 steps to 7e-4, so that the spread
    # rests first and its deep descent starts late: the one shape of a healthy run that the per-batch confirmation
    # of round 16 (a fall from where the spread rested that also breaks its trend) could mistake for a collapse.
    # Cadences no other setting used: every 16 steps, the fixed batch every 24, covariance, parameter distance and
    # weights health every 48, evaluation every 80; 720 steps, onsets at a quarter, half and three quarters, each
    # trained 180 steps on.
    Setting("latewarm", ("ema.start=0.99", "optim.lr=7e-4", "optim.warmup_steps=200", "optim.steps=720",
                         *cadences(16, 24, 48, 80, 180)),
            720, (180, 360, 540), 180, "tiny with EMA momentum from 0.99 and a 200-step lr warm-up to 7e-4, the fixed "
            "batch every 24 steps, cadences 16/48, 720 steps (never tuned on)", round=16,
            magnitudes=(("collapse", (0.28, 0.9, 3.5)), ("lr_blowup", (9.0, 45.0, 1500.0, 1e6)),
                        ("mask_leak", (0.25,)))),
    # Never tuned on: a user who predicts two large target blocks (25-35% of the image each, where every tuned
    # setting asked for 10-20%) from a batch of 80 at lr 6e-4 after a warm-up of 50, for 600 steps, reading at
    # cadences no other setting used: every 18 steps, the fixed batch every 36, covariance, parameter distance and
    # weights health every 54, evaluation every 75. Onsets at a quarter, half and three quarters, each trained 150
    # steps on.
    Setting("bigblocks", ("masks.num_targets=2", "masks.target_scale=[0.25, 0.35]", "optim.batch_size=80",
                          "optim.lr=6e-4", "optim.warmup_steps=50", "optim.steps=600",
                          *cadences(18, 36, 54, 75, 150)),
            600, (150, 300, 450), 150, "tiny predicting 2 target blocks of 25-35%, batch 80, lr 6e-4, warm-up 50, the "
            "fixed batch every 36 steps, cadences 18/54, 600 steps (never tuned on)", round=17,
            magnitudes=(("collapse", (0.32, 1.1, 3.2)), ("lr_blowup", (11.0, 55.0, 2500.0, 1e6)),
                        ("mask_leak", (0.3,)))),
    # Never tuned on: a user who makes the encoder shallow (2 blocks, where every tuned setting had 4 or 6) and the
    # predictor a single block, raises the lr to 1e-3 after a warm-up of 50 with the EMA momentum from 0.993, for 660
    # steps, reading at cadences no other setting used: every 11 steps, the fixed batch every 33, covariance,
    # parameter distance and weights health every 66, evaluation every 60. Onsets at a quarter, half and three
    # quarters, each trained 165 steps on.
    Setting("shallow", ("model.depth=2", "model.pred_depth=1", "optim.lr=1e-3", "optim.warmup_steps=50",
                        "optim.steps=660", "ema.start=0.993",
                        *cadences(11, 33, 66, 60, 165)),
            660, (165, 330, 495), 165, "tiny with a 2-block encoder and a 1-block predictor, lr 1e-3, warm-up 50, EMA "
            "from 0.993, the fixed batch every 33 steps, cadences 11/66, 660 steps (never tuned on)", round=18,
            magnitudes=(("collapse", (0.22, 0.7, 2.8)), ("lr_blowup", (14.0, 60.0, 1200.0, 1e6)),
                        ("mask_leak", (0.12,)))),
    # Never tuned on: a user who takes a 3-block encoder 80 wide (four heads of 20) with the tiny predictor, batch 72,
    # lr 8e-4 after a warm-up of 70, the EMA momentum from 0.995, for 640 steps, reading at cadences no other setting
    # used: every 13 steps, the fixed batch every 26, covariance, parameter distance and weights health every 52,
    # evaluation every 65. Onsets at a quarter, half and three quarters, each trained 160 steps on.
    Setting("depth3", ("model.depth=3", "model.embed_dim=80", "optim.batch_size=72", "optim.lr=8e-4",
                       "optim.warmup_steps=70", "optim.steps=640", "ema.start=0.995",
                       *cadences(13, 26, 52, 65, 160)),
            640, (160, 320, 480), 160, "tiny with a 3-block encoder 80 wide, batch 72, lr 8e-4, warm-up 70, EMA from "
            "0.995, the fixed batch every 26 steps, cadences 13/52, 640 steps (never tuned on)", round=19,
            magnitudes=(("collapse", (0.27, 0.85, 2.6)), ("lr_blowup", (13.0, 65.0, 1800.0, 1e6)),
                        ("mask_leak", (0.18,)))),
    # Never tuned on: a second 2-block encoder (after `shallow`), this one 112 wide (four heads of 28) with the tiny
    # 2-block predictor, batch 56, lr 9e-4 after a warm-up of 60, the EMA momentum from 0.994, for 600 steps, reading
    # at cadences no other setting used: every 12 steps, the fixed batch every 30, covariance, parameter distance and
    # weights health every 60, evaluation every 50. Onsets at a quarter, half and three quarters, each trained 150
    # steps on.
    Setting("twoblock", ("model.depth=2", "model.embed_dim=112", "optim.batch_size=56", "optim.lr=9e-4",
                         "optim.warmup_steps=60", "optim.steps=600", "ema.start=0.994",
                         *cadences(12, 30, 60, 50, 150)),
            600, (150, 300, 450), 150, "tiny with a 2-block encoder 112 wide, batch 56, lr 9e-4, warm-up 60, EMA from "
            "0.994, the fixed batch every 30 steps, cadences 12/60, 600 steps (never tuned on)", round=20,
            magnitudes=(("collapse", (0.25, 0.9, 2.4)), ("lr_blowup", (12.0, 70.0, 1500.0, 1e6)),
                        ("mask_leak", (0.15,)))),
    # Never tuned on: a user who widens the encoder to 160 (five heads of 32, where every tuned setting had 64-128 and
    # four heads), with a predictor 64 wide, batch 48, lr 5e-4 after a warm-up of 40, for 480 steps, reading at
    # cadences no other setting used: every 16 steps, the fixed batch every 32, covariance, parameter distance and
    # weights health every 48, evaluation every 60. Onsets at a quarter, half and three quarters, the first of them
    # early (step 120, soon after the fixed-batch trend starts judging), each trained 120 steps on.
    Setting("wide160", ("model.embed_dim=160", "model.num_heads=5", "model.pred_dim=64", "optim.batch_size=48",
                        "optim.lr=5e-4", "optim.warmup_steps=40", "optim.steps=480",
                        *cadences(16, 32, 48, 60, 120)),
            480, (120, 240, 360), 120, "tiny with the encoder 160 wide (five heads of 32), the predictor 64, batch 48, "
            "lr 5e-4, warm-up 40, the fixed batch every 32 steps, cadences 16/48, 480 steps (never tuned on)",
            round=21,
            magnitudes=(("collapse", (0.2, 0.75, 2.2)), ("lr_blowup", (9.0, 40.0, 900.0, 1e6)),
                        ("mask_leak", (0.1,)))),
    # Never tuned on: a user who predicts six small target blocks (8-12% of the image each, where every tuned setting
    # had two to four of 10-35%) with a slow target (EMA momentum from 0.998), lr 6e-4 after a warm-up of 30, for 400
    # steps, reading at cadences no other setting used: every 8 steps, the fixed batch every 24, covariance,
    # parameter distance and weights health every 40, evaluation every 40. Onsets at a quarter, half and three
    # quarters, each trained 100 steps on.
    Setting("manytargets", ("masks.num_targets=6", "masks.target_scale=[0.08, 0.12]", "ema.start=0.998",
                            "optim.lr=6e-4", "optim.warmup_steps=30", "optim.steps=400",
                            *cadences(8, 24, 40, 40, 100)),
            400, (100, 200, 300), 100, "tiny with six target blocks of 8-12%, EMA from 0.998, lr 6e-4, warm-up 30, the "
            "fixed batch every 24 steps, cadences 8/40, 400 steps (never tuned on)", round=22,
            magnitudes=(("collapse", (0.4, 1.3, 4.2)), ("lr_blowup", (6.5, 30.0, 700.0, 1e6)),
                        ("mask_leak", (0.06,)))),
    # Never tuned on: a user who makes the prediction harder (a context block of 60-80% of the image, where every tuned
    # setting's reached 90% or more, three targets of 12-20%), keeps AdamW's usual beta2 of 0.999 (every tuned setting
    # had 0.95) and a constant weight decay of 0.05, a thinner MLP (ratio 2), lr 6e-4 after a warm-up of 70, for 560
    # steps, reading at cadences no other setting used: every 7 steps, the fixed batch every 21, covariance, parameter
    # distance and weights health every 35, evaluation every 70. Onsets at a quarter, half and three quarters, each
    # trained 140 steps on.
    Setting("smallctx", ("masks.context_scale=[0.6, 0.8]", "masks.num_targets=3", "masks.target_scale=[0.12, 0.2]",
                         "optim.beta2=0.999", "optim.weight_decay=0.05", "optim.final_weight_decay=0.05",
                         "model.mlp_ratio=2.0", "optim.lr=6e-4", "optim.warmup_steps=70", "optim.steps=560",
                         *cadences(7, 21, 35, 70, 140)),
            560, (140, 280, 420), 140, "tiny with a context block of 60-80%, three targets of 12-20%, beta2 0.999, weight "
            "decay 0.05, MLP ratio 2, lr 6e-4, warm-up 70, the fixed batch every 21 steps, cadences 7/35, 560 steps "
            "(never tuned on)", round=23,
            magnitudes=(("collapse", (0.35, 1.1, 3.6)), ("lr_blowup", (8.0, 35.0, 1200.0, 1e6)),
                        ("mask_leak", (0.12,)))),
    # Never tuned on: a user who follows I-JEPA's large models in giving the predictor the encoder's width (96, where
    # every tuned setting's was half of it or less) and four blocks of it, with a target that follows fast (the EMA
    # momentum from 0.985; the fastest tuned was 0.99), four targets of 15-20%, lr 5e-4 after a warm-up of 60, for
    # 540 steps, reading every 9 steps, the fixed batch every 27, covariance, parameter distance and weights health
    # every 45, evaluation every 54. Onsets at a quarter, half and three quarters, each trained 135 steps on.
    Setting("predheavy", ("model.pred_dim=96", "model.pred_depth=4", "model.pred_num_heads=4", "ema.start=0.985",
                          "masks.num_targets=4", "optim.lr=5e-4", "optim.warmup_steps=60", "optim.steps=540",
                          *cadences(9, 27, 45, 54, 135)),
            540, (135, 270, 405), 135, "tiny with a predictor as wide as the encoder (96) and 4 deep, the EMA momentum "
            "from 0.985, four targets, lr 5e-4, warm-up 60, the fixed batch every 27 steps, cadences 9/45, 540 steps "
            "(never tuned on)", round=24,
            magnitudes=(("collapse", (0.33, 1.25, 3.9)), ("lr_blowup", (7.5, 28.0, 850.0, 1e6)),
                        ("mask_leak", (0.09,)))),
    # Never tuned on: a user who keeps the lr flat after its warm-up (final_lr = lr = 5e-4; every tuned setting decays
    # it tenfold or more by a cosine), so the late schedule keeps moving, with a target that never stops following
    # (the EMA momentum from 0.994 to 0.999, not to 1), looser gradient clipping (3, where every other setting clips
    # at 1 or not at all), two elongated targets (aspect 0.5-2), 520 steps, readings every 10 steps, the fixed batch
    # every 26, covariance, parameter distance and weights health every 65, evaluation every 65. Onsets at a quarter,
    # half and three quarters, each trained 130 steps on.
    Setting("flatlr", ("optim.lr=5e-4", "optim.final_lr=5e-4", "optim.start_lr=5e-5", "optim.warmup_steps=50",
                       "optim.grad_clip=3.0", "ema.start=0.994", "ema.end=0.999", "masks.num_targets=2",
                       "masks.target_aspect=[0.5, 2.0]", "optim.steps=520",
                       *cadences(10, 26, 65, 65, 130)),
            520, (130, 260, 390), 130, "tiny with a flat lr of 5e-4 after a warm-up of 50 (no decay), the EMA momentum "
            "from 0.994 to 0.999, gradient clipping at 3, two targets of aspect 0.5-2, the fixed batch every 26 steps, "
            "cadences 10/65, 520 steps (never tuned on)", round=25,
            magnitudes=(("collapse", (0.38, 1.15, 3.3)), ("lr_blowup", (9.5, 42.0, 950.0, 1e6)),
                        ("mask_leak", (0.07,)))),
) + RECENT_SETTINGS
SETTING = {s.name: s for s in SETTINGS}
