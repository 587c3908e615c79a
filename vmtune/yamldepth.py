"""How deep a YAML text's collections nest, measured before it is composed: for the readers of
policies and configurations (vmtune.policy.document) and of stack sources (vmtune.stacks.yamldoc),
which both refuse a nesting deeper than they bound."""

from __future__ import annotations


def nesting_line(text: str, limit: int) -> int | None:
    """The line where collections first nest deeper than `limit`, from libyaml's tokens (its
    scanner knows quoting exactly; a guess on the text can be fooled by a quote it misreads);
    None when they never do, or when the text is not YAML (the parse that follows says where).
    Stopping at the limit keeps the scan linear: libyaml's cost per token grows with the flow
    depth, and its composer recurses (100,000 `[` crash it)."""
    import yaml

    opening = (yaml.FlowSequenceStartToken, yaml.FlowMappingStartToken, yaml.BlockSequenceStartToken,
               yaml.BlockMappingStartToken)
    closing = (yaml.FlowSequenceEndToken, yaml.FlowMappingEndToken, yaml.BlockEndToken)
    scanner = getattr(yaml, "CSafeLoader", yaml.SafeLoader)(text)
    depth = 0
    try:
        while (token := scanner.get_token()) is not None:
            if isinstance(token, opening):
                depth += 1
                if depth > limit:
                    return int(token.start_mark.line) + 1
            elif isinstance(token, closing):
                depth -= 1
    except yaml.MarkedYAMLError as exc:
        # libyaml of PyYAML 6.0.4 has a nesting limit of its own (far above ours), and its scanner
        # may hit it while looking ahead, before handing over the token that passes ours.
        if exc.problem == "exceeded maximum nesting depth" and exc.problem_mark is not None:
            return int(exc.problem_mark.line) + 1
        return None
    except yaml.YAMLError:
        return None
    finally:
        scanner.dispose()
    return None
