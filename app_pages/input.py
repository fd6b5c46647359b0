"""Input: paste sequences, upload files, or load an example; see what the validator made of them.

The pasted text and each uploaded file are separate sources, each shown where it was given;
their records are combined for the other pages.
"""

import pandas as pd
import streamlit as st

from app_pages._ui.input import reading as inputs, uploads
from app_pages._ui.rerun.context import PageContext, current
from app_pages._ui.frame.views import PAGES
from app_pages._ui.frame.widgets import counted, kept_checkbox, kept_text_area, plain


def use_example(label: str) -> None:
    inputs.set_input(inputs.example_text(label))


def read_structure_upload(name: str, data: bytes):
    """A PDB/mmCIF upload as its protein chains' records, held for the Structure page (imported
    when a file arrives: the structure reader loads Biopython)."""
    from app_pages._ui.structure.loaded_structure import take_input_structure

    return take_input_structure(name, data)


FETCH_PROBLEM = "_accession_fetch_problem"  # session state: why the last fetch by accession failed


def fetch_accessions(accessions: list[str]) -> None:
    """"Fetch from UniProt" (a callback): the accessions' FASTA records replace the pasted text;
    a failure (offline first) is kept to be said under the button, the text left as it was."""
    from flamino_core.structure import FetchError, fetch_fasta

    from app_pages._ui.server.heavy_jobs import QueueFull, fetch_turn

    st.session_state.pop(FETCH_PROBLEM, None)
    try:
        with fetch_turn():  # bounded, one per visitor (issue #67)
            inputs.set_input("".join(fetch_fasta(accession) for accession in accessions))
    except QueueFull as err:
        st.session_state[FETCH_PROBLEM] = f"Not fetched: {err}."
    except FetchError as err:
        st.session_state[FETCH_PROBLEM] = str(err)


def accession_offer() -> None:
    """Pasted UniProt accessions (``P69905``) rather than a sequence: offer to fetch their
    sequences, as the Structure page fetches a model by accession (issue 50: refused as not a
    sequence)."""
    from flamino_core.structure import pasted_accessions

    accessions = pasted_accessions(st.session_state.get(inputs.FASTA) or "")
    if not accessions:
        st.session_state.pop(FETCH_PROBLEM, None)
        return
    from flamino_core.structure.files import fetch

    named = ", ".join(accessions)
    what = f"{plain(named)} {'is a UniProt accession' if len(accessions) == 1 else 'are UniProt accessions'}"
    if not fetch.reachable(fetch.UNIPROT_REST):  # no button that can only fail (#66 D11)
        st.info(f"{what}, not a sequence, and this server cannot reach UniProt (rest.uniprot.org) now: paste the "
                f"sequence itself (uniprot.org/uniprotkb/{plain(accessions[0])}.fasta on a machine that can).",
                icon=":material/cloud_off:")
    else:
        _fetch_button(what, named, accessions)
    problem = st.session_state.get(FETCH_PROBLEM)
    if problem:
        st.error(plain(problem), icon=":material/cloud_off:")


def _fetch_button(what: str, named: str, accessions: list[str]) -> None:
    st.info(f"{what}, not a sequence: fetch the sequence from UniProt (rest.uniprot.org), "
            "or paste the sequence itself.", icon=":material/cloud_download:")
    st.button(f"Fetch {named} from UniProt", key="_fetch_accessions", on_click=fetch_accessions, args=(accessions,),
              icon=":material/download:")


def pages_sentence() -> str:
    """The other pages, in the menu's order, as the Input page names them (``views.PAGES``)."""
    named = [f"**{page.title}**" + (f" ({page.blurb})" if page.blurb else "")
             for key, page in PAGES.items() if key != "input"]
    return ", ".join(named[:-1]) + " or " + named[-1] if len(named) > 1 else "".join(named)


def main(ctx: PageContext) -> None:
    st.header("Your sequences")
    st.markdown(
        "Paste FASTA, a bare protein sequence (UniProt's numbered blocks and GenBank's ORIGIN lines are fine) "
        "or a whole GenBank, GenPept or Swiss-Prot entry; upload files (a PDB or mmCIF structure gives one record "
        "per protein chain, and the Structure page opens on it); or try an example. Then open "
        f"any page in the menu: {pages_sentence()}."
    )

    columns = st.columns(len(inputs.EXAMPLES))
    for column, label in zip(columns, inputs.EXAMPLES, strict=True):
        column.button(label, on_click=use_example, args=(label,), icon=":material/science:", width="stretch")

    kept_text_area(
        "FASTA or sequence",
        inputs.FASTA,
        height=220,
        placeholder=">my_protein optional description\nMKTAYIAKQRQISFVKSHFSRQ…",
    )
    accession_offer()
    # Any file type is accepted on purpose: the validator then says what a PDF or a picture is
    # and what to do, instead of the uploader refusing it without a reason.
    uploads.uploader(
        read_structure_upload,
        label="…or upload files (FASTA, GenBank, GenPept, Swiss-Prot, PDB, mmCIF; gzipped .gz accepted"
        f"{inputs.upload_limit_words()})",
        max_upload_size=inputs.upload_size_mb(),
        help="Each file is kept below with its records, beside the pasted text; remove a file to drop its records.",
    )
    result, counts = ctx.parsed, ctx.counts  # read once, before the sidebar (the widgets above were synced)
    uploads.file_list(counts[1:])
    if result is None:
        st.info("No input yet.")
        return
    inputs.show_issues(result)
    if result.nucleotide_labels or st.session_state.get(inputs.ALLOW_DNA):
        nucleotide_choice(result)
    if not result.records:
        return
    pasted, from_files = counts[0], sum(counts[1:])
    sources = f" ({pasted} pasted, {from_files} from files)" if uploads.files() and pasted else ""
    st.success(f"{counted(len(result.records), 'record')} ready for analysis{sources}.", icon=":material/check_circle:")
    table = pd.DataFrame(
        [{"id": r.id, "length": len(r.sequence), "description": r.description} for r in result.records]
    )
    st.dataframe(table, hide_index=True, width="stretch")
    if len(result.records) > 1:
        st.caption("Choose which record the pages analyse in the sidebar; compare them all on **Records**.")


def nucleotide_choice(result) -> None:
    """Say that some records are DNA/RNA, and let the user insist that they be read as protein."""
    count = len(result.nucleotide_labels)
    if count and not st.session_state.get(inputs.ALLOW_DNA):
        st.info(
            f"{counted(count, 'record')} {'is' if count == 1 else 'are'} nucleotide sequence. "
            "ESM-2 reads proteins: translate DNA to protein first "
            "(e.g. Biopython's `Seq.translate`, EMBOSS `transeq`), or tick the box to read the letters as amino acids.",
            icon=":material/genetics:",
        )
    kept_checkbox(
        "Analyse nucleotide sequences as protein anyway",
        inputs.ALLOW_DNA,
        help="The letters A, C, G, T, U and N are read as the amino acids of the same names; the model's output "
        "on them says little about any protein.",
    )


if __name__ == "__main__":  # run by app.py (context.serve), with this rerun's context
    main(current())
