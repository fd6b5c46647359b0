"""Input: paste or upload sequences, or load an example; see what the validator made of them."""

import pandas as pd
import streamlit as st

from app_pages._ui import inputs
from app_pages._ui.policy import current_limits
from app_pages._ui.widgets import kept_text_area, plain
from flamino_core.fasta import InputIssue, parse_fasta_bytes, to_fasta


def use_example(label: str) -> None:
    inputs.set_input(inputs.example_text(label))
    st.session_state.pop("_upload_issues", None)


def use_uploads() -> None:
    """Validate each uploaded file and put the records it kept into the text box."""
    files = st.session_state.get("_uploads") or []
    if not files:
        st.session_state.pop("_upload_issues", None)
        return
    kept, issues = [], []
    limits = current_limits()
    for file in files:
        too_big = limits.check_upload(file.size, "the file")
        if too_big:
            issues.append((file.name, InputIssue(None, too_big, "error")))
            continue
        result = parse_fasta_bytes(file.getvalue(), **inputs.input_limits())
        kept += result.records
        issues += [(file.name, issue) for issue in result.errors + result.warnings]
    inputs.set_input(to_fasta(kept) if kept else "")
    st.session_state["_upload_issues"] = issues


def main() -> None:
    st.header("Your sequences")
    st.markdown(
        "Paste FASTA or a bare protein sequence, upload FASTA files, or try an example. "
        "Then open **Masked predictions**, **Embeddings** or **Attention** in the menu."
    )

    columns = st.columns(len(inputs.EXAMPLES))
    for column, label in zip(columns, inputs.EXAMPLES, strict=True):
        column.button(label, on_click=use_example, args=(label,), icon=":material/science:", width="stretch")

    kept_text_area(
        "FASTA or sequence",
        inputs.FASTA,
        on_change=lambda: st.session_state.pop("_upload_issues", None),  # they describe old text
        height=220,
        placeholder=">my_protein optional description\nMKTAYIAKQRQISFVKSHFSRQ…",
    )

    # Any file type is accepted on purpose: the validator then says what a GenBank file, a PDF
    # or a picture is and what to do, instead of the uploader refusing it without a reason.
    st.file_uploader(
        "…or upload FASTA files (.fasta, .fa, .faa, .txt, optionally gzipped)",
        accept_multiple_files=True,
        key="_uploads",
        on_change=use_uploads,
        max_upload_size=inputs.upload_size_mb(),
        help="The records of all files are put in the box above; files with problems are reported below.",
    )
    for name, issue in st.session_state.get("_upload_issues", []):
        show = st.error if issue.level == "error" else st.warning
        show(plain(f"{name}: {issue}"))

    result = inputs.parsed()
    if result is None:
        st.info("No input yet.")
        return
    inputs.show_issues(result)
    if not result.records:
        return
    st.success(f"{len(result.records)} record(s) ready for analysis.", icon=":material/check_circle:")
    table = pd.DataFrame(
        [{"id": r.id, "length": len(r.sequence), "description": r.description} for r in result.records]
    )
    st.dataframe(table, hide_index=True, width="stretch")
    if len(result.records) > 1:
        st.caption("Choose which record the pages analyse in the sidebar.")


main()
