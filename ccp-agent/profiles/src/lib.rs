// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! `dnn-profiles`: the DNN model profile table, `ci/scenarios/models.toml`, with its types,
//! parsing and validation. The traffic emulator (`ci/trainemu`) and the cluster simulator
//! (`ccp-agent/sim`) both build it in ([`BUILTIN_MODELS`]) and read a user's file through
//! [`ModelFile::parse`], so the two tools always agree on what a profile says.
//!
//! A profile gives one model's gradient bytes per data-parallel worker and iteration (fp32: 4 bytes
//! per parameter), its compute (forward + backward) time per iteration, and where each number
//! comes from (the sources are listed at the top of `models.toml`).
//!
//! ```
//! let m = dnn_profiles::ModelFile::builtin();
//! assert_eq!(m.models["vgg16"].compute_ms, 141.0);
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

/// The model profiles shipped with both binaries (`ci/scenarios/models.toml`).
pub const BUILTIN_MODELS: &str = include_str!("../../../ci/scenarios/models.toml");

/// One model profile of `models.toml` (`[models.NAME]`).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Model {
    /// Human-readable model name (e.g. "VGG16").
    pub display: String,
    /// Parameters, in millions.
    pub params_millions: f64,
    /// Gradient bytes one worker contributes per iteration on the source's setup (fp32: 4 bytes
    /// per parameter), in bytes.
    pub bytes_per_iteration: u64,
    /// Compute (forward + backward) time per iteration, in milliseconds.
    pub compute_ms: f64,
    /// Factor applied to `bytes_per_iteration` to fit the emulator's 100 Mbit/s bottleneck.
    pub scale: f64,
    /// Where `params_millions`/`bytes_per_iteration` come from (paper title, table/figure).
    pub source_bytes: String,
    /// Where `compute_ms` comes from, or how it was estimated.
    pub source_compute: String,
    /// True when `compute_ms` is an estimate, not a published figure.
    #[serde(default)]
    pub compute_estimated: bool,
    /// True when `bytes_per_iteration` is an estimate, not a published figure.
    #[serde(default)]
    pub bytes_estimated: bool,
    /// Why `scale` has its value.
    pub scale_note: String,
}

/// The whole `models.toml`.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ModelFile {
    /// Profiles by key (the name scenarios use in `jobs[].model`).
    pub models: BTreeMap<String, Model>,
}

/// Why a models file was refused: the file, and the field (`models.KEY.FIELD`) with its value
/// when one value is at fault.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProfileError {
    /// The file, as the caller named it.
    pub file: String,
    /// What is wrong (TOML syntax error, or `models.KEY.FIELD = VALUE: why`).
    pub message: String,
}

impl fmt::Display for ProfileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.file, self.message)
    }
}

impl std::error::Error for ProfileError {}

impl ModelFile {
    /// Parses and validates a models file; `file` names it in errors. Refuses unknown fields,
    /// `bytes_per_iteration = 0`, a negative or non-finite `compute_ms`, and `scale` outside
    /// (0, 1], naming the model, field and value.
    pub fn parse(text: &str, file: &str) -> Result<ModelFile, ProfileError> {
        let err = |message: String| ProfileError {
            file: file.to_string(),
            message,
        };
        let m: ModelFile = toml::from_str(text).map_err(|e| err(e.to_string()))?;
        if m.models.is_empty() {
            return Err(err("no [models.NAME] table".into()));
        }
        for (k, p) in &m.models {
            let f = |field: &str| format!("models.{k}.{field}");
            if p.bytes_per_iteration == 0 {
                return Err(err(format!(
                    "{} = {}: must be > 0",
                    f("bytes_per_iteration"),
                    p.bytes_per_iteration
                )));
            }
            if !(p.compute_ms.is_finite() && p.compute_ms >= 0.0) {
                return Err(err(format!(
                    "{} = {}: must be a number >= 0",
                    f("compute_ms"),
                    p.compute_ms
                )));
            }
            if !(p.scale.is_finite() && p.scale > 0.0 && p.scale <= 1.0) {
                return Err(err(format!(
                    "{} = {}: must be in (0, 1]",
                    f("scale"),
                    p.scale
                )));
            }
        }
        Ok(m)
    }

    /// The built-in profiles ([`BUILTIN_MODELS`]); their validity is checked by this crate's
    /// tests, so this cannot fail in a tested build.
    #[allow(clippy::expect_used)]
    pub fn builtin() -> ModelFile {
        ModelFile::parse(BUILTIN_MODELS, "models.toml (built in)")
            .expect("built-in models.toml is valid")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_is_valid_and_complete() {
        let m = ModelFile::builtin();
        for k in [
            "vgg16",
            "vgg19",
            "resnet50",
            "wideresnet101",
            "bert",
            "gpt2",
            "dlrm",
        ] {
            assert!(m.models.contains_key(k), "models.toml lacks {k}");
        }
        assert_eq!(m.models["vgg16"].bytes_per_iteration, 553_440_000);
    }

    #[test]
    fn bad_values_are_named() {
        let t = BUILTIN_MODELS.replace("compute_ms = 141", "compute_ms = -1");
        let e = ModelFile::parse(&t, "m.toml").unwrap_err();
        assert_eq!(
            e.to_string(),
            "m.toml: models.vgg16.compute_ms = -1: must be a number >= 0"
        );
        let t = BUILTIN_MODELS.replace("scale = 0.00242", "scale = 2");
        assert!(ModelFile::parse(&t, "m.toml")
            .unwrap_err()
            .to_string()
            .contains("models.vgg16.scale = 2"));
        let t = BUILTIN_MODELS.replace(
            "bytes_per_iteration = 553_440_000",
            "bytes_per_iteration = 0",
        );
        assert!(ModelFile::parse(&t, "m.toml")
            .unwrap_err()
            .to_string()
            .contains("bytes_per_iteration = 0"));
        let e = ModelFile::parse("[models.x]\ndisplay = 1", "m.toml").unwrap_err();
        assert!(e.to_string().starts_with("m.toml: "), "{e}");
        assert!(ModelFile::parse("[models]\n", "m.toml")
            .unwrap_err()
            .to_string()
            .contains("no [models.NAME]"));
        assert!(ModelFile::parse("", "m.toml")
            .unwrap_err()
            .to_string()
            .contains("models"));
    }
}
