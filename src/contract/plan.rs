//! Plans: several TaskSpecs, with the checks that need all of them at once
//! (unique ids, known dependencies, no cycles).
//!
//! A plan file is one of:
//!
//! - a JSON array of TaskSpec tables (task paths `[0]`, `[1]`, …);
//! - a TOML (or JSON) table whose only key is `task`, an array of TaskSpec
//!   tables — in TOML, `[[task]]` sections (paths `task[0]`, …);
//! - a single TaskSpec table, read as a one-task plan (path `""`). This is
//!   unambiguous because `task` is not a TaskSpec key, and it lets the
//!   admission gate take the same file as `grant check`.
//!
//! A plan with no task is refused: an empty queue is far more often a typo
//! (`[[tasks]]`) than an intention, and the gate must not report success on
//! it.

use std::collections::HashMap;
use std::path::Path;

use serde_json::Value;

use super::task::TaskSpec;
use super::{ContractError, Rule, field_path};
use crate::document::{self, type_name};
use crate::result::MAX_LISTED;

/// A parsed plan: each task's raw table and its JSON path. Nothing is
/// validated yet; see [`Plan::validate`].
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    entries: Vec<(String, Value)>,
}

/// One task of a plan after validation.
#[derive(Clone, Debug, PartialEq)]
pub struct CheckedTask {
    /// JSON path of the task in the plan file.
    pub at: String,
    /// The task's `id` as written, when it is a string (also for invalid
    /// tasks, so that rejections can name them).
    pub id: Option<String>,
    /// The validated task, or every error found in it, cross-task errors
    /// included.
    pub result: Result<TaskSpec, Vec<ContractError>>,
}

impl CheckedTask {
    /// A name for messages: the id, else the path.
    pub fn label(&self) -> String {
        match &self.id {
            Some(id) => id.clone(),
            None if self.at.is_empty() => "(task without id)".to_owned(),
            None => format!("(task without id at {})", self.at),
        }
    }

    fn push_error(&mut self, error: ContractError) {
        match &mut self.result {
            Ok(_) => self.result = Err(vec![error]),
            Err(errors) => errors.push(error),
        }
    }
}

impl Plan {
    /// Reads a plan file (JSON or TOML, by extension or content).
    pub fn load_file(path: &Path) -> Result<Plan, Vec<ContractError>> {
        let doc = document::read_file(path)
            .map_err(|e| vec![ContractError::new(Rule::InvalidDocument, "", e.message)])?;
        Plan::from_value(&doc)
    }

    /// Recognises the plan shapes described in the module documentation.
    pub fn from_value(doc: &Value) -> Result<Plan, Vec<ContractError>> {
        let entries: Vec<(String, Value)> = match doc {
            Value::Array(items) => items
                .iter()
                .enumerate()
                .map(|(i, v)| (format!("[{i}]"), v.clone()))
                .collect(),
            Value::Object(table) if table.contains_key("task") => {
                let mut errors = Vec::new();
                super::check_unknown_keys(table, "", &["task"], &mut errors);
                match &table["task"] {
                    Value::Array(items) if errors.is_empty() => items
                        .iter()
                        .enumerate()
                        .map(|(i, v)| (format!("task[{i}]"), v.clone()))
                        .collect(),
                    Value::Array(_) => return Err(errors),
                    other => {
                        errors.push(ContractError::new(
                            Rule::WrongType,
                            "task",
                            format!(
                                "must be an array of task tables, found {}; in TOML write \
                                 [[task]] (double brackets) for each task",
                                type_name(other)
                            ),
                        ));
                        return Err(errors);
                    }
                }
            }
            Value::Object(_) => vec![(String::new(), doc.clone())],
            other => {
                return Err(vec![ContractError::new(
                    Rule::InvalidDocument,
                    "",
                    format!(
                        "a plan must be an array of tasks, a table of [[task]] entries or one \
                         task table, found {}",
                        type_name(other)
                    ),
                )]);
            }
        };
        if entries.is_empty() {
            return Err(vec![ContractError::new(
                Rule::InvalidDocument,
                "",
                "the plan holds no task; write at least one task ([[task]] in TOML)",
            )]);
        }
        Ok(Plan { entries })
    }

    /// Number of tasks in the plan.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the plan holds no task (never true for a plan built by
    /// [`Plan::from_value`]).
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Validates every task and then the plan as a whole: duplicate ids,
    /// dependencies on ids the plan does not contain, and dependency cycles.
    /// Cross-task checks use each task's raw `id` and `dependencies`, so an
    /// otherwise invalid task still gets every error that applies to it.
    pub fn validate(&self) -> Vec<CheckedTask> {
        let mut tasks: Vec<CheckedTask> = self
            .entries
            .iter()
            .map(|(at, value)| CheckedTask {
                at: at.clone(),
                id: value.get("id").and_then(Value::as_str).map(str::to_owned),
                result: TaskSpec::from_value(value, at),
            })
            .collect();
        let deps: Vec<Vec<(usize, String)>> = self
            .entries
            .iter()
            .map(|(_, v)| raw_dependencies(v))
            .collect();

        let mut by_id: HashMap<&str, Vec<usize>> = HashMap::new();
        for (i, (_, v)) in self.entries.iter().enumerate() {
            if let Some(id) = v.get("id").and_then(Value::as_str) {
                by_id.entry(id).or_default().push(i);
            }
        }

        let mut extra: Vec<(usize, ContractError)> = Vec::new();
        for (id, holders) in by_id.iter().filter(|(_, h)| h.len() > 1) {
            for &i in holders {
                let mut others: Vec<String> = holders
                    .iter()
                    .filter(|&&j| j != i)
                    .take(MAX_LISTED)
                    .map(|&j| self.entries[j].0.clone())
                    .collect();
                if holders.len() - 1 > MAX_LISTED {
                    others.push(format!("and {} more", holders.len() - 1 - MAX_LISTED));
                }
                extra.push((
                    i,
                    ContractError::new(
                        Rule::DuplicateTaskId,
                        field_path(&self.entries[i].0, "id"),
                        format!(
                            "id {id:?} is also used by the task at {}; give every task of a \
                             plan its own id",
                            others.join(", ")
                        ),
                    ),
                ));
            }
        }
        for (i, list) in deps.iter().enumerate() {
            for (j, dep) in list {
                if !by_id.contains_key(dep.as_str()) {
                    extra.push((
                        i,
                        ContractError::new(
                            Rule::UnknownDependency,
                            format!("{}[{j}]", field_path(&self.entries[i].0, "dependencies")),
                            format!(
                                "no task in this plan has id {dep:?}; add that task to the plan \
                                 or remove the dependency"
                            ),
                        ),
                    ));
                }
            }
        }

        // Cycles, among tasks whose id is unique (a duplicated id has no
        // single meaning); self-dependencies are reported by the task itself.
        let unique = |id: &str| match by_id.get(id).map(Vec::as_slice) {
            Some([only]) => Some(*only),
            _ => None,
        };
        let adjacency: Vec<Vec<usize>> = deps
            .iter()
            .enumerate()
            .map(|(i, list)| {
                list.iter()
                    .filter_map(|(_, d)| unique(d))
                    .filter(|&j| j != i)
                    .collect()
            })
            .collect();
        for mut component in strongly_connected(&adjacency)
            .into_iter()
            .filter(|c| c.len() > 1)
        {
            component.sort_unstable();
            // Bounded: a cycle through thousands of tasks names the first
            // few and counts the rest.
            let mut names: Vec<String> = component
                .iter()
                .take(MAX_LISTED)
                .map(|&i| format!("{:?}", tasks[i].id.as_deref().unwrap_or("")))
                .collect();
            if component.len() > MAX_LISTED {
                names.push(format!("and {} more", component.len() - MAX_LISTED));
            }
            for &i in &component {
                extra.push((
                    i,
                    ContractError::new(
                        Rule::DependencyCycle,
                        field_path(&self.entries[i].0, "dependencies"),
                        format!(
                            "tasks {} depend on each other in a cycle, so none can start; \
                             remove one of these dependencies",
                            names.join(", ")
                        ),
                    ),
                ));
            }
        }

        for (i, error) in extra {
            tasks[i].push_error(error);
        }
        tasks
    }
}

/// The string entries of a task's `dependencies`, with their indices,
/// whatever else is wrong with the task.
fn raw_dependencies(task: &Value) -> Vec<(usize, String)> {
    task.get("dependencies")
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .enumerate()
                .filter_map(|(j, d)| d.as_str().map(|d| (j, d.to_owned())))
                .collect()
        })
        .unwrap_or_default()
}

/// Tarjan's strongly connected components, iteratively (a long dependency
/// chain must not overflow the stack).
fn strongly_connected(adjacency: &[Vec<usize>]) -> Vec<Vec<usize>> {
    const UNVISITED: usize = usize::MAX;
    let n = adjacency.len();
    let mut index = vec![UNVISITED; n];
    let mut low = vec![0; n];
    let mut on_stack = vec![false; n];
    let mut stack = Vec::new();
    let mut next = 0;
    let mut components = Vec::new();
    for root in 0..n {
        if index[root] != UNVISITED {
            continue;
        }
        index[root] = next;
        low[root] = next;
        next += 1;
        stack.push(root);
        on_stack[root] = true;
        let mut calls: Vec<(usize, usize)> = vec![(root, 0)];
        while let Some(&(v, edge)) = calls.last() {
            if let Some(&w) = adjacency[v].get(edge) {
                if let Some(top) = calls.last_mut() {
                    top.1 += 1;
                }
                if index[w] == UNVISITED {
                    index[w] = next;
                    low[w] = next;
                    next += 1;
                    stack.push(w);
                    on_stack[w] = true;
                    calls.push((w, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
            } else {
                calls.pop();
                if let Some(&(u, _)) = calls.last() {
                    low[u] = low[u].min(low[v]);
                }
                if low[v] == index[v] {
                    let mut component = Vec::new();
                    while let Some(w) = stack.pop() {
                        on_stack[w] = false;
                        component.push(w);
                        if w == v {
                            break;
                        }
                    }
                    components.push(component);
                }
            }
        }
    }
    components
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn task(id: &str, deps: &[&str]) -> Value {
        json!({
            "id": id, "title": "t", "objective": "o", "task_type": "research",
            "required_capabilities": ["repo.read"], "side_effect_class": "none",
            "risk_class": "low", "dependencies": deps, "worker": "reader"
        })
    }

    fn errors_by_task(plan: Value) -> Vec<Vec<(Rule, String)>> {
        Plan::from_value(&plan)
            .unwrap()
            .validate()
            .into_iter()
            .map(|t| match t.result {
                Ok(_) => Vec::new(),
                Err(e) => e.into_iter().map(|e| (e.rule, e.path)).collect(),
            })
            .collect()
    }

    #[test]
    fn accepts_a_json_array_plan() {
        let got = errors_by_task(json!([task("a", &[]), task("b", &["a"])]));
        assert_eq!(got, [vec![], vec![]]);
    }

    #[test]
    fn accepts_a_toml_plan_of_task_tables() {
        let doc = crate::document::parse(
            "[[task]]\nid = \"a\"\ntitle = \"t\"\nobjective = \"o\"\ntask_type = \"verify\"\n\
             required_capabilities = [\"repo.read\"]\nside_effect_class = \"none\"\n\
             risk_class = \"low\"\nworker = \"tester\"\n",
            crate::document::Format::Toml,
        )
        .unwrap();
        let checked = Plan::from_value(&doc).unwrap().validate();
        assert_eq!(checked[0].at, "task[0]");
        assert!(checked[0].result.is_ok());
    }

    #[test]
    fn accepts_a_single_task_as_a_one_task_plan() {
        let plan = Plan::from_value(&task("solo", &[])).unwrap();
        assert_eq!(plan.len(), 1);
        let checked = plan.validate();
        assert_eq!(checked[0].at, "");
        assert!(checked[0].result.is_ok());
    }

    #[test]
    fn accepts_a_diamond_of_dependencies() {
        let got = errors_by_task(json!([
            task("a", &[]),
            task("b", &["a"]),
            task("c", &["a"]),
            task("d", &["b", "c"])
        ]));
        assert!(got.iter().all(Vec::is_empty), "{got:?}");
    }

    #[test]
    fn rejects_an_empty_plan() {
        for empty in [json!([]), json!({"task": []})] {
            let e = Plan::from_value(&empty).unwrap_err();
            assert_eq!(e[0].rule, Rule::InvalidDocument);
        }
    }

    #[test]
    fn rejects_plans_of_the_wrong_shape() {
        let e = Plan::from_value(&json!("tasks")).unwrap_err();
        assert_eq!(e[0].rule, Rule::InvalidDocument);
        let e = Plan::from_value(&json!({"task": task("a", &[])})).unwrap_err();
        assert_eq!((e[0].rule, e[0].path.as_str()), (Rule::WrongType, "task"));
        assert!(e[0].message.contains("[[task]]"));
        let e = Plan::from_value(&json!({"task": [task("a", &[])], "tasks": []})).unwrap_err();
        assert_eq!((e[0].rule, e[0].path.as_str()), (Rule::UnknownKey, "tasks"));
    }

    #[test]
    fn rejects_every_task_that_shares_an_id() {
        let got = errors_by_task(json!([task("a", &[]), task("b", &[]), task("a", &[])]));
        assert_eq!(got[0], [(Rule::DuplicateTaskId, "[0].id".to_owned())]);
        assert_eq!(got[1], []);
        assert_eq!(got[2], [(Rule::DuplicateTaskId, "[2].id".to_owned())]);
    }

    #[test]
    fn rejects_a_dependency_on_an_id_not_in_the_plan() {
        let got = errors_by_task(json!([task("a", &[]), task("b", &["a", "ghost"])]));
        assert_eq!(
            got[1],
            [(Rule::UnknownDependency, "[1].dependencies[1]".to_owned())]
        );
    }

    #[test]
    fn rejects_every_task_on_a_dependency_cycle() {
        let got = errors_by_task(json!([
            task("a", &["c"]),
            task("b", &["a"]),
            task("c", &["b"]),
            task("d", &[])
        ]));
        for (i, errors) in got.iter().take(3).enumerate() {
            assert_eq!(
                errors,
                &[(Rule::DependencyCycle, format!("[{i}].dependencies"))]
            );
        }
        assert_eq!(got[3], []);
    }

    #[test]
    fn reports_a_self_dependency_once_not_also_as_a_cycle() {
        let got = errors_by_task(json!([task("a", &["a"])]));
        assert_eq!(
            got[0],
            [(Rule::SelfDependency, "[0].dependencies[0]".to_owned())]
        );
    }

    #[test]
    fn reports_cross_task_errors_on_otherwise_invalid_tasks() {
        let mut broken = task("a", &["ghost"]);
        broken["title"] = json!("");
        let got = errors_by_task(json!([broken, task("a", &[])]));
        assert_eq!(
            got[0],
            [
                (Rule::EmptyField, "[0].title".to_owned()),
                (Rule::DuplicateTaskId, "[0].id".to_owned()),
                (Rule::UnknownDependency, "[0].dependencies[0]".to_owned()),
            ]
        );
    }

    #[test]
    fn handles_a_long_dependency_chain_without_recursion() {
        let n = 20_000;
        let mut tasks = vec![task("t0", &[&format!("t{}", n - 1)])];
        for i in 1..n {
            tasks.push(task(&format!("t{i}"), &[&format!("t{}", i - 1)]));
        }
        let got = errors_by_task(Value::Array(tasks));
        assert!(
            got.iter()
                .all(|e| e.len() == 1 && e[0].0 == Rule::DependencyCycle)
        );
    }
}
