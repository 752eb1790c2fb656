"""The vendor maps of the instrument catalogue (config/maps/, each citing its manual), for the tests that go
through every one of them."""

CATALOGUE = ["dynasonics_tfx_5000", "dynasonics_tfx_ultra", "eh_liquistation_csf22", "hach_3400sc_conductivity",
             "hach_pc_sc_ph", "msa_ultima_x"]
