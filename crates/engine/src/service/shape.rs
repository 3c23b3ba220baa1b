//! Shape checks on JSON that arrives at the engine: an object where one is required, a depth
//! the files can hold, and type names for the messages that refuse the rest.

use serde_json::{Map, Value};

use memdir_api::error::{Error, Result};
use memdir_api::limits;

/// Refuses JSON nested deeper than [`limits::MAX_DATA_DEPTH`].
pub fn check_depth(field: &str, v: &Value) -> Result<()> {
    let d = memdir_store::codec::depth(v);
    if d > limits::MAX_DATA_DEPTH {
        return Err(Error::invalid(
            field,
            format!(
                "{field} is nested {d} levels deep; the limit is {}",
                limits::MAX_DATA_DEPTH
            ),
        )
        .hint("flatten the document"));
    }
    Ok(())
}

/// Refuses `data` that is not a JSON object or is nested too deep.
pub fn check_object<'a>(field: &str, v: &'a Value) -> Result<&'a Map<String, Value>> {
    let obj = v.as_object().ok_or_else(|| {
        Error::invalid(
            field,
            format!("{field} must be a JSON object, got {}", type_name(v)),
        )
        .hint("wrap the value in an object, e.g. {\"note\": \"...\"}")
    })?;
    check_depth(field, v)?;
    Ok(obj)
}

/// The JSON type name of a value, for error messages.
pub fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
