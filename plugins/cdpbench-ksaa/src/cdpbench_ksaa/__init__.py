"""cdpbench-ksaa: sequential releases with different attribute sets, the linkage graph across
releases, k-linkability / k-diversity and the linkage attack (after Amiri et al., Information
Sciences 2018, KSAA). See the package README."""
