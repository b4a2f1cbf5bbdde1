#!/bin/bash
echo "talbet 60"
