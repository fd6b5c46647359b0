LOCUS       NP_000509                147 aa            linear   PRI 02-JUN-2024
DEFINITION  hemoglobin subunit beta [Homo sapiens].
ACCESSION   NP_000509
VERSION     NP_000509.1
DBSOURCE    REFSEQ: accession NM_000518.5
KEYWORDS    RefSeq; MANE Select.
SOURCE      Homo sapiens (human)
  ORGANISM  Homo sapiens
            Eukaryota; Metazoa; Chordata; Craniata; Vertebrata; Euteleostomi;
            Mammalia; Eutheria; Euarchontoglires; Primates; Haplorrhini;
            Catarrhini; Hominidae; Homo.
REFERENCE   1  (residues 1 to 147)
  AUTHORS   Lawn,R.M., Efstratiadis,A., O'Connell,C. and Maniatis,T.
  TITLE     The nucleotide sequence of the human beta-globin gene
  JOURNAL   Cell 21 (3), 647-651 (1980)
   PUBMED   6254664
COMMENT     REVIEWED REFSEQ: This record has been curated by NCBI staff. The
            reference sequence was derived from NM_000518.5.
FEATURES             Location/Qualifiers
     source          1..147
                     /organism="Homo sapiens"
                     /db_xref="taxon:9606"
                     /chromosome="11"
                     /map="11p15.4"
     Protein         1..147
                     /product="hemoglobin subunit beta"
                     /note="beta globin; hemoglobin beta chain; beta-globin"
                     /calculated_mol_wt=15867
     Region          8..146
                     /region_name="Hb-beta_like"
                     /note="Hemoglobin beta, gamma, delta subunits; cd08925"
                     /db_xref="CDD:271284"
     CDS             1..147
                     /gene="HBB"
                     /gene_synonym="beta-globin; CD113t-C; ECYT6"
                     /coded_by="NM_000518.5:51..494"
                     /db_xref="CCDS:CCDS7753.1"
                     /db_xref="GeneID:3043"
                     /db_xref="HGNC:HGNC:4827"
                     /db_xref="MIM:141900"
ORIGIN      
        1 mvhltpeeks avtalwgkvn vdevggealg rllvvypwtq rffesfgdls tpdavmgnpk
       61 vkahgkkvlg afsdglahld nlkgtfatls elhcdklhvd penfrllgnv lvcvlahhfg
      121 keftppvqaa yqkvvagvan alahkyh
//
